// The cost of placing a two-step add in its workspace's turn (session 33, T11): PK reads under
// call ids of the caller's own (BullMQ's `queue.add`, then `placeAdded`'s script), sequential and
// 64 in flight, from two builds' callers on one worker, taking turns at going first:
// CALLER_BASE and CALLER_THIS (builds' dist/src/index.js). Said per side and round: calls/s, p50,
// and the bench process's CPU per call (its callers; the worker is the same for both).
// `npm run build && CALLER_BASE=… CALLER_THIS=dist/src/index.js node --import tsx bench/own-id-calls.ts`.
import { randomUUID } from 'node:crypto';
import { baseCaller, benchSite } from './agentdb-worker.ts';
import { type CallingClient, must, pkReadTable } from './pk-read.ts';
import { drive, quantile, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const SEQ = Number(process.env.BENCH_SEQ_CALLS ?? 2000);
const CONC = Number(process.env.BENCH_CONC_CALLS ?? 5000);

const site = benchSite(REDIS_URL, 'own-id', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
await site.worker({}, process.env.WORKER_BIN);
const sides: Record<string, CallingClient & { close(): Promise<void> }> = {};
for (const [name, setting] of [
  ['base', 'CALLER_BASE'],
  ['this', 'CALLER_THIS'],
] as const) {
  const c = await baseCaller(site, setting);
  if (c) sides[name] = c;
}
const read = (client: CallingClient) => (i: number) =>
  must(
    client.call({
      workspace: 'bench',
      agent: 'reader',
      settings: { database: 'agent' },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] },
      callId: randomUUID(),
    }),
  );
const out: Record<string, { seqPerS: number; seqP50Ms: number; seqCpuMs: number; concPerS: number; concP50Ms: number; concCpuMs: number }[]> = {};
try {
  await pkReadTable(site.client);
  for (const c of Object.values(sides)) {
    await drive(1000, 1, read(c));
    await drive(1000, 16, read(c));
  }
  for (let r = 0; r < ROUNDS; r++) {
    const names = Object.keys(sides);
    for (const name of r % 2 === 0 ? names : names.reverse()) {
      const one = read(sides[name]!);
      const cpu0 = process.cpuUsage();
      const seq = await drive(SEQ, 1, one);
      const cpu1 = process.cpuUsage(cpu0);
      const conc = await drive(CONC, 64, one);
      const cpu2 = process.cpuUsage(cpu0);
      const ms = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
      const p50 = (l: number[]) =>
        round(
          quantile(
            [...l].sort((a, b) => a - b),
            0.5,
          ),
          2,
        );
      (out[name] ??= []).push({
        seqPerS: Math.round(SEQ / seq.seconds),
        seqP50Ms: p50(seq.latencies),
        seqCpuMs: round(ms(cpu1) / SEQ, 3),
        concPerS: Math.round(CONC / conc.seconds),
        concP50Ms: p50(conc.latencies),
        concCpuMs: round((ms(cpu2) - ms(cpu1)) / CONC, 3),
      });
    }
  }
  console.log(JSON.stringify({ rounds: ROUNDS, ...out }));
} finally {
  for (const c of Object.values(sides)) await c.close();
  await site.close();
}
