// What the executor child spends on a restore the quota weighs, planned twice (the weighing dry
// run, then the restore planning its own: main before session 29, L3) against planned once (the
// restore runs the weighed plan, `WeighedPlan`), in one process with no worker or IPC between, on
// a database with COMMITS commits (default 10,000) in one generation. Alternates the two, ROUNDS
// times (default 8) each of a restore in place to the middle of the history and its undo, and
// counts the history index files read (each plan reads its generation's), besides the CPU.
//   node --import tsx bench/restore-plan-once.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { databasePath } from '../src/contracts/database-id.ts';
import type { DbTarget } from '../src/executor/executor-protocol.ts';
import { HistoryCapture } from '../src/history/handle-capture.ts';
import { restoreInPlace } from '../src/history/restore-requests.ts';
import { PLAN_LIMITS } from '../src/policy/plan-limits.ts';
import { HandleCache } from '../src/sqlite/handle-cache.ts';

const COMMITS = Number(process.env.COMMITS ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const by = { who: 'operator:bench', via: 'operator' as const };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// Index files read, counted where every plan reads them (segment-index.ts: fs.readFileSync).
let indexReads = 0;
let indexBytes = 0;
const readFileSync = fs.readFileSync;
fs.readFileSync = ((file: fs.PathOrFileDescriptor, ...rest: unknown[]) => {
  const out = (readFileSync as (...a: unknown[]) => Buffer | string)(file, ...rest);
  if (typeof file === 'string' && file.endsWith('.idx')) {
    indexReads++;
    indexBytes += out.length;
  }
  return out;
}) as typeof fs.readFileSync;

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-plan-once-'));
const history = new HistoryCapture(dataDir, { checkpointBytes: 64 * 1024 * 1024, retentionDays: 30 });
const handles = new HandleCache({ size: 4, ...history.hooks() });
const db: DbTarget = { id: 'acme/a', path: databasePath(dataDir, 'acme', 'a', 0), shard: 0, limits: PLAN_LIMITS.enterprise };
try {
  const h = handles.open(db, 'write');
  h.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const insert = h.prepare('INSERT INTO t (v) VALUES (?)');
  let middle = 0;
  for (let i = 0; i < COMMITS; i++) {
    insert.run(`row ${i} `.padEnd(120, 'x'));
    history.run(h, db);
    if (i === COMMITS / 2) {
      middle = Date.now();
      while (Date.now() === middle) {
        // The next commit a millisecond later: the moment falls between two commits.
      }
    }
  }
  type Mode = 'twice' | 'once';
  const cpuMs: Record<Mode, number[]> = { twice: [], once: [] };
  const wallMs: Record<Mode, number[]> = { twice: [], once: [] };
  const reads: Record<Mode, number[]> = { twice: [], once: [] };
  const kb: Record<Mode, number[]> = { twice: [], once: [] };
  /** The weighing dry run, then the restore: handed the weighed plan (`once`) or planning its own (`twice`). */
  const weighedRestore = (mode: Mode, what: { at: number } | { undo: string }) => {
    const dry = restoreInPlace(handles, history, dataDir, { op: 'restore', db, ...what, dryRun: true, weighing: true, by });
    return restoreInPlace(handles, history, dataDir, { op: 'restore', db, ...what, by, ...(mode === 'once' && dry.weighed ? { weighed: dry.weighed } : {}) });
  };
  // A first pair, not counted: warms the code and the page cache.
  weighedRestore('twice', { undo: weighedRestore('twice', { at: middle }).undoId! });
  for (let r = 0; r < ROUNDS; r++) {
    for (const mode of (r % 2 === 0 ? ['twice', 'once'] : ['once', 'twice']) as Mode[]) {
      const cpu = process.cpuUsage();
      const before = indexReads;
      const bytesBefore = indexBytes;
      const t = performance.now();
      const done = weighedRestore(mode, { at: middle });
      weighedRestore(mode, { undo: done.undoId! });
      const used = process.cpuUsage(cpu);
      wallMs[mode].push((performance.now() - t) / 2);
      cpuMs[mode].push((used.user + used.system) / 1000 / 2);
      reads[mode].push((indexReads - before) / 2);
      kb[mode].push((indexBytes - bytesBefore) / 1024 / 2);
    }
  }
  console.log(`${COMMITS} commits, ${ROUNDS} rounds alternated; a restore (in place to the middle, and its undo, the mean of the two)`);
  console.log('| planned | ms a restore (median) | CPU ms a restore (median) | index files read a restore | index KB read a restore |');
  for (const mode of ['twice', 'once'] as const)
    console.log(
      `| ${mode} | ${median(wallMs[mode]).toFixed(1)} | ${median(cpuMs[mode]).toFixed(1)} | ${median(reads[mode])} | ${median(kb[mode]).toFixed(0)} |`,
    );
} finally {
  handles.closeAll();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
