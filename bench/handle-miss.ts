// One handle cache miss in an executor child's terms (issue 31 part 3): HandleCache with
// history's hooks, more databases than handles, a PK read of a random one each time. Prints the
// median of each phase: open+configure, history's copy on open, the LRU close (copy before close,
// close, seal check), and the read itself.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { databasePath } from '../src/contracts/database-id.ts';
import { HistoryCapture } from '../src/history/handle-capture.ts';
import { HandleCache, type HandleTarget } from '../src/sqlite/handle-cache.ts';
import { query } from '../src/sqlite/sqlite-query.ts';

const DATABASES = Number(process.env.MISS_DATABASES ?? 300);
const HANDLES = Number(process.env.MISS_HANDLES ?? 8);
const READS = Number(process.env.MISS_READS ?? 2000);
/** `query` as DATA_QUERY_SQL opens its handle (no copy on open), or `read` as before issue 31's change. */
const INTENT = process.env.MISS_INTENT === 'read' ? 'read' : 'query';

// MISS_DIR keeps the databases between runs: a run that finds them reads them as a fresh child
// does, with none of their history's state in memory.
const kept = process.env.MISS_DIR;
const dataDir = kept ?? fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-miss-'));
const fresh = !kept || !fs.existsSync(path.join(dataDir, 'ready'));
const history = new HistoryCapture(dataDir, { checkpointBytes: 4 << 20, retentionDays: 30 });
const phases: Record<string, number[]> = { opened: [], capturedOnOpen: [], beforeClose: [], closed: [], read: [], miss: [] };
let mark = 0;
const hooks = history.hooks();
const cache = new HandleCache({
  size: HANDLES,
  ...hooks,
  onOpened: (db, t, intent) => {
    phases.opened!.push(performance.now() - mark);
    const at = performance.now();
    const ran = hooks.onOpened!(db, t, intent);
    phases.capturedOnOpen!.push(performance.now() - at);
    return ran;
  },
  beforeClose: (db, t, opened) => {
    const at = performance.now();
    const token = hooks.beforeClose!(db, t, opened);
    phases.beforeClose!.push(performance.now() - at);
    mark = performance.now();
    return token;
  },
  afterClose: (t, token) => {
    hooks.afterClose!(t, token);
    phases.closed!.push(performance.now() - mark);
    mark = performance.now();
  },
});
const targets: HandleTarget[] = Array.from({ length: DATABASES }, (_, i) => ({ id: `w/d${i}`, path: databasePath(dataDir, 'w', `d${i}`, 0), shard: 0 }));
try {
  for (const t of fresh ? targets : []) {
    const db = cache.open(t, 'write');
    db.exec('CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)');
    history.run(db, t);
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999) INSERT INTO kv SELECT i, 'value-' || i FROM n`);
    history.run(db, t);
  }
  cache.closeAll();
  if (kept) fs.writeFileSync(path.join(dataDir, 'ready'), '');
  for (const k of Object.keys(phases)) phases[k] = [];
  for (let i = 0; i < READS; i++) {
    const t = targets[Math.floor(Math.random() * DATABASES)]!;
    const hit = cache.isOpen(t.path);
    const at = performance.now();
    mark = at;
    const db = cache.open(t, INTENT);
    const opened = performance.now();
    // As the child runs DATA_QUERY_SQL: both guard layers on a statement new to this handle.
    query(db, 'SELECT v FROM kv WHERE id = ?', [i % 1000], 100, 1 << 20);
    phases.read!.push(performance.now() - opened);
    if (!hit) phases.miss!.push(performance.now() - at);
  }
  cache.closeAll();
} finally {
  if (!kept) fs.rmSync(dataDir, { recursive: true, force: true });
}
const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : 0);
const ms = (x: number) => Math.round(x * 1000) / 1000;
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const medianMs = Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, ms(median(v))]));
console.log(
  JSON.stringify({
    intent: INTENT,
    databases: DATABASES,
    handles: HANDLES,
    reads: READS,
    misses: phases.miss!.length,
    medianMs,
    meanMissMs: ms(mean(phases.miss!)),
  }),
);
