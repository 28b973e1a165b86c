// `npm run build && node --import tsx bench/insert-parts.ts [a/dist] [b/dist]`: what each part of
// a small insert costs the executor child, in one process (issue 31). The child's own code
// (`dispatch`, then the copy into history that the child runs after the answer) is driven in a
// loop, no IPC, no worker: bench/small-insert.ts's write (one new row, a call key, the commit's
// activity row as the worker sends it) and the PK read, with history capture on or off and the
// activity row or not, so that each part's CPU is the difference between two variants run in
// the same process, rounds alternating. For the full insert the CPU before the answer (the
// write, the lock and the answered note) and after it (the copy) are read apart. Each dist given
// (default: this checkout's) runs every variant; two dists compare builds. ROUNDS (default 6),
// CALLS (default 3000), VARIANTS (default all: insert, insert-noact, insert-nohist,
// insert-nohist-noact, read, read-nohist), CHECKPOINT_BYTES (default 4 MiB, HISTORY_CHECKPOINT_BYTES's default),
// IDS (default `seq`: call ids counting up, each record appended; `uuid`: random ones, as clients send them).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median, round } from './stats.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 6);
const CALLS = Number(process.env.CALLS ?? 3000);
const VARIANTS = (process.env.VARIANTS ?? 'insert,insert-noact,insert-nohist,insert-nohist-noact,read,read-nohist').split(',');
const CHECKPOINT_BYTES = Number(process.env.CHECKPOINT_BYTES ?? 4 * 1024 * 1024);
const dists = (process.argv.length > 2 ? process.argv.slice(2) : [fileURLToPath(new URL('../dist', import.meta.url))]).map((d) => path.resolve(d));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-insert-parts-'));

interface Side {
  name: string;
  dataDir: string;
  calls: number;
  one(i: number): void;
  /** CPU µs per call, per round: in all, and (history on) before the answer and the copy after it. */
  cpu: number[];
  before: number[];
  after: number[];
  /** The last call's CPU µs before the answer and after it (the full insert only). */
  lastBefore?: number;
  lastAfter?: number;
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

async function side(dist: string, build: string, variant: string): Promise<Side> {
  const load = (p: string) => import(pathToFileURL(path.join(dist, p)).href);
  const { HandleCache } = await load('src/sqlite/handle-cache.js');
  const { HistoryCapture } = await load('src/history/handle-capture.js');
  const { dispatch } = await load('src/executor/executor-dispatch.js');
  const { PLAN_LIMITS } = await load('src/policy/plan-limits.js');
  const dataDir = path.join(root, `${build}-${variant}`);
  const history = variant.includes('nohist') ? undefined : new HistoryCapture(dataDir, { checkpointBytes: CHECKPOINT_BYTES, retentionDays: 30 });
  const handles = new HandleCache({ size: 64, settleLater: true, ...history?.hooks() });
  const opts = { dataDir, heapLimitMb: 256, handleCacheSize: 64, maxResultBytes: 1024 * 1024, statementTimeoutMs: 30_000 };
  const db = { id: 'bench/reader', path: path.join(dataDir, 'shards', '0', 'bench', 'reader.sqlite'), shard: 0, limits: PLAN_LIMITS.enterprise };
  fs.mkdirSync(path.dirname(db.path), { recursive: true });
  const s: Side = { name: `${build} ${variant}`, dataDir, calls: 0, one: () => undefined, cpu: [], before: [], after: [] };
  let beforeUs = 0;
  let afterUs = 0;
  const run = (req: object, split = false) => {
    const t0 = split ? cpuUs() : 0;
    const out = dispatch(handles, opts, req, history);
    const t1 = split ? cpuUs() : 0;
    // As the child does once the answer is sent: the copy, then a closed handle's settling.
    history?.finishCommitted();
    handles.settle();
    if (split) {
      beforeUs += t1 - t0;
      afterUs += cpuUs() - t1;
    }
    if (!out.ok) throw new Error(`${s.name}: ${JSON.stringify(out)}`);
  };
  run({ op: 'write', db, sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: 'k1', callId: 'k1' });
  const ids = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
  run({ op: 'write', db, sql: "INSERT INTO kv SELECT value, 'value-' || value FROM json_each(?)", params: [ids], callKey: 'k2', callId: 'k2' });
  run({ op: 'write', db, sql: 'CREATE TABLE log (id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: 'k3', callId: 'k3' });
  let n = 0;
  const sql = 'INSERT INTO log (v) VALUES (?)';
  const activity = !variant.includes('noact');
  const split = variant === 'insert';
  s.one = variant.startsWith('read')
    ? (i) => run({ op: 'query', db, sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000], maxRows: 1000, callId: `call-${i}` })
    : () => {
        const callId = process.env.IDS === 'uuid' ? randomUUID() : `call-${n}`;
        n++;
        const note = activity ? { activity: { tool: 'DATA_WRITE_SQL', by: 'agent:reader', callId } } : {};
        run({ op: 'write', db, sql, params: [`row ${n}`], callKey: `bench:reader:${callId}`, callId, ...note }, split);
      };
  const inner = s.one;
  s.one = (i) => {
    s.calls++;
    beforeUs = 0;
    afterUs = 0;
    inner(i);
    s.lastBefore = beforeUs;
    s.lastAfter = afterUs;
  };
  return s;
}

const sides: Side[] = [];
// History's bytes per call of each side: its segments' frames (a WAL frame is a page and 24 bytes).
const historyBytes = new Map<Side, number>();
const sizeOf = (dir: string): number =>
  fs
    .readdirSync(dir, { withFileTypes: true })
    .reduce((n, e) => n + (e.isDirectory() ? sizeOf(path.join(dir, e.name)) : fs.statSync(path.join(dir, e.name)).size), 0);
try {
  for (const [i, dist] of dists.entries()) for (const v of VARIANTS) sides.push(await side(dist, dists.length > 1 ? 'ABCDEF'[i]! : 'this', v));
  for (const s of sides) for (let i = 0; i < 1000; i++) s.one(i);
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      let before = 0;
      let after = 0;
      const c0 = cpuUs();
      for (let i = 0; i < CALLS; i++) {
        s.one(i);
        before += s.lastBefore ?? 0;
        after += s.lastAfter ?? 0;
      }
      s.cpu.push((cpuUs() - c0) / CALLS);
      s.before.push(before / CALLS);
      s.after.push(after / CALLS);
    }
  }
  for (const s of sides) {
    const history = path.join(s.dataDir, 'history');
    if (fs.existsSync(history)) historyBytes.set(s, sizeOf(history) / s.calls);
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
for (const s of sides) {
  const split = s.name.endsWith(' insert') ? { beforeAnswerUs: round(median(s.before), 1), copyAfterUs: round(median(s.after), 1) } : {};
  const bytes = historyBytes.has(s) ? { historyBytesPerCall: Math.round(historyBytes.get(s)!) } : {};
  console.log(JSON.stringify({ side: s.name, cpuUsPerCall: round(median(s.cpu), 1), ...split, ...bytes, rounds: s.cpu.map((x) => round(x, 0)) }));
}
