// `npm run build && node --import tsx bench/worker-instructions.ts <a/bin/agentdb.js> [b/bin/agentdb.js]`:
// the instructions an `agentdb worker` executes per sequential PK read, two builds in turn
// (issue 31), counted by valgrind's callgrind (needs valgrind): unlike CPU time, the count does
// not move with the machine's load, so a cut of a few per cent shows on a busy host. Each build's
// worker runs under callgrind with instrumentation off through start-up and WARM reads, on for
// CALLS reads (`callgrind_control -i on`, then a dump), then stops; its executor children run
// natively (not counted). Prints instructions (Ir) per read for each build and B / A.
// CALLS (default 300), WARM (default 300). Slow: the worker runs ~50× slower while counted.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchSite } from './agentdb-worker.ts';
import { pkReadTable } from './pk-read.ts';
import { startProcess } from './process.ts';
import { drive } from './stats.ts';

const CALLS = Number(process.env.CALLS ?? 300);
const WARM = Number(process.env.WARM ?? 300);
const bins = [process.argv[2], process.argv[3] ?? fileURLToPath(new URL('../dist/bin/agentdb.js', import.meta.url))].map((b) => {
  if (!b) throw new Error('usage: worker-instructions.ts <a/bin/agentdb.js> [b/bin/agentdb.js]');
  return path.resolve(b);
});

/** Instructions per read of one build's worker. */
async function count(bin: string): Promise<number> {
  const site = benchSite(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'instr', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
  const out = mkdtempSync(path.join(os.tmpdir(), 'agentdb-callgrind-'));
  const { child } = await startProcess(
    'valgrind',
    ['--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${out}/cg.%p`, process.execPath, bin, 'worker'],
    { ...site.env, LOG_LEVEL: 'info' },
    /"msg":"worker ready"/,
  );
  try {
    const read = await pkReadTable(site.client);
    await drive(WARM, 1, read);
    const ctl = (...args: string[]) => spawnSync('callgrind_control', [...args, String(child.pid)], { encoding: 'utf8' });
    ctl('-z');
    ctl('-i', 'on');
    await drive(CALLS, 1, read);
    ctl('-i', 'off');
    ctl('-d');
    const files = readdirSync(out).map((f) => readFileSync(path.join(out, f), 'utf8'));
    // The dump made on request: its "summary:" (or "totals:") line counts what ran while on.
    const totals = files.flatMap((t) => [...t.matchAll(/^(?:summary|totals): (\d+)/gm)].map((m) => Number(m[1])));
    return Math.max(...totals) / CALLS;
  } finally {
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
    await site.close();
    rmSync(out, { recursive: true, force: true });
  }
}

const ir: number[] = [];
for (const bin of bins) ir.push(await count(bin));
console.log(JSON.stringify({ calls: CALLS, irPerRead: { A: Math.round(ir[0]!), B: Math.round(ir[1]!) }, BoverA: +(ir[1]! / ir[0]!).toFixed(4) }));
