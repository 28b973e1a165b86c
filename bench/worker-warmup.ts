// `npm run build && node --import tsx bench/worker-warmup.ts`: the worker's CPU per PK read round
// by round from its start, ours beside the executor floor's (raw BullMQ whose worker asks a forked
// child for the row, bench/raw-child-worker.ts), issue 31. A fresh worker spends CPU on V8's
// optimizing compilers (background threads, counted in the process's CPU) until its hot code is
// compiled; ours has more code on a call's path than the floor, so it compiles longer, and a
// bench that measures the first tens of thousands of calls counts that (session 31, P7). Sides
// alternate round by round (the floor first in even rounds); each line is one round of each.
// CALLS per round (default 3000), ROUNDS (default 20), CONC (default 64), WORKER_BIN as
// floor.ts, REDIS_URL (a Redis of the run's own).
import os from 'node:os';
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { cpuSeconds } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { drive, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CALLS = Number(process.env.CALLS ?? 3000);
const ROUNDS = Number(process.env.ROUNDS ?? 20);
const CONC = Number(process.env.CONC ?? 64);

const site = benchSite(REDIS_URL, 'warm', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
const worker = await site.worker({}, process.env.WORKER_BIN);
const raw = await rawBullmq(REDIS_URL, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});
const sides = {
  floor: { call: (i: number) => raw.call(i).then(() => undefined), pid: raw.pid! },
  ours: { call: await pkReadTable(site.client), pid: worker.pid },
};
const total = { floor: 0, ours: 0 };
try {
  for (let r = 0; r < ROUNDS; r++) {
    const ms: Record<string, number> = {};
    for (const [k, s] of r % 2 === 0 ? Object.entries(sides) : Object.entries(sides).reverse()) {
      const c0 = cpuSeconds(s.pid);
      await drive(CALLS, CONC, s.call);
      ms[k] = ((cpuSeconds(s.pid) - c0) * 1000) / CALLS;
    }
    total.floor += CALLS;
    total.ours += CALLS;
    console.log(
      JSON.stringify({
        round: r + 1,
        callsSoFar: total.ours,
        floorMs: round(ms.floor!),
        oursMs: round(ms.ours!),
        oursOverFloor: round(ms.ours! / ms.floor!),
        load: round(os.loadavg()[0]!, 1),
      }),
    );
  }
} finally {
  await raw.close();
  await worker.stop('SIGTERM');
  await site.close();
}
