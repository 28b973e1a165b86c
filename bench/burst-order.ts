// Queue order under one workspace's burst (session 32, T9's method; T10's A/B): workspace `loud`
// (4 agents, one shard) sends BENCH_BURST (default 1,000) `SELECT 1` at once; workspace `quiet`,
// from a client of its own, reads 10 times one after another meanwhile. Said per side: the
// quiet read alone (p50 of 10), its first read during the burst, the median of its 10, and the
// burst's drain time. `npm run build && node --import tsx bench/burst-order.ts`.
// CALLER_BASE / CALLER_THIS: builds' `dist/src/index.js` whose clients add the calls (where the
// queue's order is decided), taking turns at going first, BENCH_ROUNDS (default 2) each, one worker.
// BENCH_OWN_IDS=1: the burst's calls carry call ids of the caller's own (BullMQ's two-step add, as
// /v1/calls and /mcp with a client's ids; session 33, T11).
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { keysFor } from '../src/redis/keys.ts';
import { baseCaller, benchSite } from './agentdb-worker.ts';
import type { CallingClient } from './pk-read.ts';
import { median, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const BURST = Number(process.env.BENCH_BURST ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const settings = { database: 'agent' as const };
const OWN_IDS = process.env.BENCH_OWN_IDS === '1';

const site = benchSite(REDIS_URL, 'burst-order', { SHARD_COUNT: '1', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
await site.worker({}, process.env.WORKER_BIN);
// Two clients a side: the burst's and the quiet workspace's own.
const sides: Record<string, { loud: CallingClient & { close(): Promise<void> }; quiet: CallingClient & { close(): Promise<void> } }> = {};
for (const [name, setting] of [
  ['base', 'CALLER_BASE'],
  ['this', 'CALLER_THIS'],
] as const) {
  const loud = await baseCaller(site, setting);
  const quiet = await baseCaller(site, setting);
  if (loud && quiet) sides[name] = { loud, quiet };
}
const redis = new Redis(REDIS_URL);
const queue = `${keysFor(site.config.prefix).bullPrefix}:${keysFor(site.config.prefix).queueName(0)}`;
/** Jobs waiting on the one shard: its wait list and its prioritized set. */
const queued = async () => (await redis.llen(`${queue}:wait`)) + (await redis.zcard(`${queue}:prioritized`));
const read = async (client: CallingClient, workspace: string, agent: string, ownId = false): Promise<number> => {
  const t0 = performance.now();
  const answer = await client.call({
    workspace,
    agent,
    settings,
    tool: 'DATA_QUERY_SQL',
    arguments: { sql: 'SELECT 1' },
    ...(ownId ? { callId: randomUUID() } : {}),
  });
  if (!answer.ok) throw new Error(`burst-order bench: ${JSON.stringify(answer)}`);
  return performance.now() - t0;
};
const out: Record<string, { aloneP50Ms: number; firstMs: number; medianOf10Ms: number; drainedS: number }[]> = {};
try {
  for (const { loud, quiet } of Object.values(sides)) await Promise.all([read(loud, 'loud', 'a0'), read(quiet, 'quiet', 'q')]);
  for (let r = 0; r < ROUNDS; r++) {
    const names = Object.keys(sides);
    for (const name of r % 2 === 0 ? names : names.reverse()) {
      const { loud, quiet } = sides[name]!;
      const alone: number[] = [];
      for (let i = 0; i < 10; i++) alone.push(await read(quiet, 'quiet', 'q'));
      const t0 = performance.now();
      const burst = Promise.all(Array.from({ length: BURST }, (_, i) => read(loud, 'loud', `a${i % 4}`, OWN_IDS))).then(() => (performance.now() - t0) / 1000);
      // The quiet reads start once half the burst waits in the queue (its adds reached Redis).
      while ((await queued()) < BURST / 2) await new Promise((resolve) => setImmediate(resolve));
      const during: number[] = [];
      for (let i = 0; i < 10; i++) during.push(await read(quiet, 'quiet', 'q'));
      const drainedS = await burst;
      (out[name] ??= []).push({
        aloneP50Ms: round(median(alone), 1),
        firstMs: round(during[0]!, 1),
        medianOf10Ms: round(median(during), 1),
        drainedS: round(drainedS, 2),
      });
    }
  }
  console.log(JSON.stringify({ burst: BURST, rounds: ROUNDS, ownIds: OWN_IDS, ...out }, null, 1));
} finally {
  for (const { loud, quiet } of Object.values(sides)) await Promise.all([loud.close(), quiet.close()]);
  redis.disconnect();
  await site.close();
}
