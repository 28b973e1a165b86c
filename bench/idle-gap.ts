// `npm run build && node --import tsx bench/idle-gap.ts`: whether a call's CPU in each process
// grows with the time between calls (issue 31, session 34). Sequential PK reads and small inserts
// (history on), each also with GAP_MS (default 1) of idle time before every call, in alternating
// rounds; prints each process's CPU per call (worker, its children, this caller), medians of the
// rounds. A slower round trip costs CPU in every process by itself (caches and branch predictors
// gone cold, the CPU's clock down while it waited), not only the work it adds: a change that
// shortens the child's part of an insert shortens the worker's and the caller's too.
// CALLS (default 1000), ROUNDS (default 4), WORKER_BIN as query-only.ts, REDIS_URL.
import os from 'node:os';
import { benchSite } from './agentdb-worker.ts';
import { childPids, cpuSeconds } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { smallInsert } from './small-insert.ts';
import { median } from './stats.ts';

const site = benchSite(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'gap', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
const worker = await site.worker({}, process.env.WORKER_BIN);
const CALLS = Number(process.env.CALLS ?? 1000);
const GAP_MS = Number(process.env.GAP_MS ?? 1);
try {
  const insert = await smallInsert(site.client);
  const read = await pkReadTable(site.client);
  const gap = () => new Promise((resolve) => setTimeout(resolve, GAP_MS));
  const sides: Record<string, (i: number) => Promise<void>> = {
    read,
    readAfterGap: async (i) => {
      await gap();
      await read(i);
    },
    insert,
    insertAfterGap: async (i) => {
      await gap();
      await insert(i);
    },
  };
  for (const call of Object.values(sides)) for (let i = 0; i < 1500; i++) await call(i);
  const out: Record<string, { worker: number[]; children: number[]; caller: number[] }> = {};
  for (let r = 0; r < Number(process.env.ROUNDS ?? 4); r++) {
    const names = Object.keys(sides);
    for (const name of r % 2 ? names.reverse() : names) {
      const call = sides[name]!;
      const kids = () => childPids(worker.pid).reduce((n, p) => n + cpuSeconds(p), 0);
      const [c0, w0, k0] = [process.cpuUsage(), cpuSeconds(worker.pid), kids()];
      for (let i = 0; i < CALLS; i++) await call(r * CALLS + i);
      const c = process.cpuUsage(c0);
      const o = (out[name] ??= { worker: [], children: [], caller: [] });
      o.worker.push(Math.round(((cpuSeconds(worker.pid) - w0) / CALLS) * 1e6));
      o.children.push(Math.round(((kids() - k0) / CALLS) * 1e6));
      o.caller.push(Math.round((c.user + c.system) / CALLS));
    }
  }
  const usPerCall = Object.fromEntries(
    Object.entries(out).map(([k, o]) => [k, { worker: median(o.worker), children: median(o.children), caller: median(o.caller) }]),
  );
  console.log(JSON.stringify({ gapMs: GAP_MS, calls: CALLS, load: os.loadavg().map((l) => +l.toFixed(2)), usPerCall, rounds: out }));
} finally {
  await site.close();
}
