// `npm run build && node --import tsx bench/caller-ab.ts <a/src/calls/client.ts> [b/src/calls/client.ts]`:
// the CPU the caller spends per PK read, two builds of the client library side by side in this
// process (issue 31), as bench/worker-ab.ts does for workers. Each side has its own prefix and
// its own `agentdb worker` (this checkout's dist/ for both: only the caller differs); rounds of
// CALLS sequential reads, then IN_FLIGHT_CALLS at 64 in flight, alternate A B B A …, and the
// medians of the rounds are compared. B is this checkout's client unless given. A baseline:
// another commit's src/ exported outside the checkout with a node_modules link
// (`git archive main src package.json | tar -x -C /tmp/base && ln -s $PWD/node_modules /tmp/base/`).
// ROUNDS (default 8), CALLS (default 1000), IN_FLIGHT_CALLS (default 3000; 0 skips them).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchSite, type BenchSite } from './agentdb-worker.ts';
import { pkReadTable } from './pk-read.ts';
import { drive, median, round, summarise } from './stats.ts';
import type { AgentDbClient } from '../src/calls/client.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const CALLS = Number(process.env.CALLS ?? 1000);
const IN_FLIGHT_CALLS = Number(process.env.IN_FLIGHT_CALLS ?? 3000);
const modules = [process.argv[2], process.argv[3] ?? fileURLToPath(new URL('../src/calls/client.ts', import.meta.url))].map((m) => {
  if (!m) throw new Error('usage: caller-ab.ts <a/src/calls/client.ts> [b/src/calls/client.ts]');
  return path.resolve(m);
});

interface Side {
  name: string;
  site: BenchSite;
  client: AgentDbClient;
  query(i: number): Promise<void>;
  cpu: number[];
  p50: number[];
  msPerCall: number[];
  conc: { cpu: number[]; p50: number[]; perSec: number[] };
}

const sides: Side[] = [];
try {
  for (const [i, mod] of modules.entries()) {
    const name = i === 0 ? 'A' : 'B';
    const site = benchSite(REDIS_URL, `cab-${name}`, { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
    await site.worker();
    const { AgentDbClient: Client } = (await import(mod)) as { AgentDbClient: typeof AgentDbClient };
    const client = new Client({ redisUrl: REDIS_URL, prefix: site.config.prefix, shardCount: site.config.shardCount, rateLimits: false });
    const query = await pkReadTable(client);
    sides.push({ name, site, client, query, cpu: [], p50: [], msPerCall: [], conc: { cpu: [], p50: [], perSec: [] } });
    await drive(500, 1, query);
    await drive(500, 16, query);
  }
  const cpuMs = (since: NodeJS.CpuUsage, calls: number) => {
    const u = process.cpuUsage(since);
    return (u.user + u.system) / 1000 / calls;
  };
  for (let r = 0; r < ROUNDS; r++) {
    // A B, then B A: neither build always runs first after the other's round.
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      let before = process.cpuUsage();
      let d = await drive(CALLS, 1, side.query);
      side.cpu.push(cpuMs(before, CALLS));
      side.p50.push(summarise(d.latencies, d.seconds).p50Ms);
      side.msPerCall.push((d.seconds * 1000) / CALLS);
      if (IN_FLIGHT_CALLS <= 0) continue;
      before = process.cpuUsage();
      d = await drive(IN_FLIGHT_CALLS, 64, side.query);
      side.conc.cpu.push(cpuMs(before, IN_FLIGHT_CALLS));
      const s = summarise(d.latencies, d.seconds);
      side.conc.p50.push(s.p50Ms);
      side.conc.perSec.push(s.callsPerSec);
    }
  }
  const med = (xs: number[]) => round(median(xs));
  for (const s of sides) {
    console.log(
      JSON.stringify({
        side: s.name,
        client: path.relative(process.cwd(), modules[sides.indexOf(s)]!),
        sequential: { callerCpuMsPerCall: med(s.cpu), p50Ms: med(s.p50), msPerCall: med(s.msPerCall) },
        ...(IN_FLIGHT_CALLS > 0 ? { inFlight64: { callerCpuMsPerCall: med(s.conc.cpu), p50Ms: med(s.conc.p50), callsPerSec: med(s.conc.perSec) } } : {}),
        cpuRounds: s.cpu.map((c) => round(c, 3)),
      }),
    );
  }
  const [a, b] = sides;
  const pair = (xa: number[], xb: number[]) => med(xa.map((x, i) => xb[i]! / x));
  console.log(
    JSON.stringify({
      BoverA: {
        sequentialCallerCpu: pair(a!.cpu, b!.cpu),
        sequentialP50: pair(a!.p50, b!.p50),
        ...(IN_FLIGHT_CALLS > 0
          ? {
              inFlight64CallerCpu: pair(a!.conc.cpu, b!.conc.cpu),
              inFlight64P50: pair(a!.conc.p50, b!.conc.p50),
              inFlight64Throughput: pair(a!.conc.perSec, b!.conc.perSec),
            }
          : {}),
      },
    }),
  );
} finally {
  for (const s of sides) {
    await s.client.close();
    await s.site.close();
  }
}
