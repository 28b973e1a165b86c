import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runAsOf } from '../../src/calls/as-of-run.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { AsOfTarget, DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { AS_OF_ROOT, momentsBytes, sweepMoments } from '../../src/history/as-of-cache.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { planAsOf } from '../../src/history/as-of-moment.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { commitLine, readCommits } from '../../src/history/segment-index.ts';
import { historyRange } from '../../src/history/restore-plan.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';
import { pastMs } from '../helpers/history.ts';

// Reading the past in place (issue 29 part 4): a read's `as_of` must see exactly what a fork
// restored at the same moment holds, name the moment just before a call's write by its id,
// refuse what history does not hold, and keep a moment's file for the next read of it.
let dataDir = '';
let pool: ExecutorPool;
// A small checkpoint size: the WAL starts over often, so moments span several segments.
withHistoryPool('agentdb-as-of-', { handleCacheSize: 2, checkpointBytes: 16 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const calls = historyCalls(() => pool);
const SELECT = 'SELECT id, a, b FROM t ORDER BY id';

const read = (db: DbTarget, target: AsOfTarget, build = true): Promise<ExecOutcome> =>
  pool.run({ op: 'query', db, sql: SELECT, params: [], maxRows: 1000, asOf: { target, ...(build ? { build: true as const } : {}) } });

async function rowsAsOf(db: DbTarget, target: AsOfTarget): Promise<unknown[]> {
  const out = await read(db, target);
  if (!out.ok) throw new Error(`${out.error.code}: ${out.error.detail}`);
  return (out.result as { rows: unknown[] }).rows;
}

async function liveRows(db: DbTarget): Promise<unknown[]> {
  return ((await calls.ok({ op: 'query', db, sql: SELECT, params: [], maxRows: 1000 })) as { rows: unknown[] }).rows;
}

/** Writes `n` random changes to `t` in `db`, each under its own call id; the rows after each, and when it was answered. */
async function randomWrites(db: DbTarget, n: number, seed: number, ids: string[]): Promise<{ rows: unknown[]; at: number }[]> {
  const [ws, agent] = db.id.split('/');
  let x = seed;
  const rand = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  const states: { rows: unknown[]; at: number }[] = [];
  for (let i = 0; i < n; i++) {
    const id = `c${seed}x${i}`;
    const r = rand();
    const sql =
      r < 0.55
        ? 'INSERT INTO t (a, b) VALUES (?, ?)'
        : r < 0.85
          ? 'UPDATE t SET a = ? WHERE id = (SELECT id FROM t ORDER BY random() LIMIT 1) AND ? IS NOT NULL'
          : 'DELETE FROM t WHERE id = (SELECT min(id) FROM t) AND ? IS NOT NULL AND ? IS NOT NULL';
    await calls.ok({ op: 'write', db, sql, params: [`v${i}-${'x'.repeat(Math.floor(r * 800))}`, i], callKey: callKey(ws!, agent!, id) });
    ids.push(id);
    states.push({ rows: await liveRows(db), at: Date.now() });
  }
  return states;
}

describe('as_of: reading the past in place', () => {
  it('reads at random moments exactly what a fork restored at the same moment holds', async () => {
    const db = historyTarget(dataDir, 'past/rand');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    const start = Date.now();
    const ids: string[] = [];
    await randomWrites(db, 40, 7, ids);
    // A second generation: moments on both sides of its snapshot.
    await calls.ok({ op: 'snapshot', db, reason: 'manual' });
    await randomWrites(db, 40, 11, ids);
    const end = Date.now();
    expect(listGenerations(localSource(dataDir, db.id)).length).toBeGreaterThan(1);
    let fork = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: start, max: end }), async (at) => {
        const forkDb = historyTarget(dataDir, `past/f${++fork}`);
        await calls.ok({ op: 'restoreInto', db: forkDb, source: db.id, at, by: calls.by, timeoutMs: 60_000 });
        expect(await rowsAsOf(db, { at })).toEqual(await liveRows(forkDb));
      }),
      { numRuns: 12 },
    );
  });

  it('reads just before a call by its id, exactly the state after the write before it', async () => {
    const db = historyTarget(dataDir, 'past/calls');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    const ids: string[] = [];
    // Back to back: several commits share a millisecond, which the call's own frames tell apart.
    const states = await randomWrites(db, 30, 3, ids);
    for (let i = 1; i < ids.length; i++) {
      expect(await rowsAsOf(db, { callId: ids[i]!, callKeys: [callKey('past', 'calls', ids[i]!)] }), `before ${ids[i]}`).toEqual(states[i - 1]!.rows);
    }
    // Before the first write of the table's rows: the table, empty.
    expect(await rowsAsOf(db, { callId: ids[0]!, callKeys: [callKey('past', 'calls', ids[0]!)] })).toEqual([]);
  });

  it('tells apart calls whose commits share a millisecond', async () => {
    const db = historyTarget(dataDir, 'past/burst');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    // Sent at once: the database's line runs them back to back, in order, several to a millisecond.
    const n = 40;
    const ids = Array.from({ length: n }, (_, i) => `burst${i}`);
    await Promise.all(
      ids.map((id, i) => calls.ok({ op: 'write', db, sql: 'INSERT INTO t (a, b) VALUES (?, ?)', params: [id, i], callKey: callKey('past', 'burst', id) })),
    );
    const all = await liveRows(db);
    expect(all.map((r) => (r as unknown[])[2])).toEqual(ids.map((_, i) => i));
    for (let i = 0; i < n; i++) {
      expect(await rowsAsOf(db, { callId: ids[i]!, callKeys: [callKey('past', 'burst', ids[i]!)] }), `before ${ids[i]}`).toEqual(all.slice(0, i));
    }
  });

  it('finds a call among commits that share its millisecond by the frames its record went into', async () => {
    const db = historyTarget(dataDir, 'past/samems');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    const n = 12;
    const keys = Array.from({ length: n }, (_, i) => callKey('past', 'samems', `same${i}`));
    for (let i = 0; i < n; i++) await calls.ok({ op: 'write', db, sql: 'INSERT INTO t (a, b) VALUES (?, ?)', params: [`row${i}`, i], callKey: keys[i]! });
    // Every commit, and every call's record, in one millisecond: only the frames tell them apart.
    const at = historyRange(localSource(dataDir, db.id)).latest!;
    for (const gen of listGenerations(localSource(dataDir, db.id))) {
      for (const seg of listSegments(gen))
        fs.writeFileSync(
          seg.indexPath,
          readCommits(seg.indexPath)
            .map((c) => commitLine({ ...c, at }))
            .join(''),
        );
    }
    const records = new Database(':memory:');
    records.exec('CREATE TABLE _agentdb_calls (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID');
    for (const key of keys) records.prepare("INSERT INTO _agentdb_calls VALUES (?, '{}', ?, NULL)").run(key, at);
    const file = path.join(dataDir, 'samems-check.sqlite');
    for (let i = 0; i < n; i++) {
      const plan = planAsOf(localSource(dataDir, db.id), records, { callId: `same${i}`, callKeys: [keys[i]!] }, 30);
      buildRestore(plan, file);
      const built = new Database(file, { readonly: true });
      expect(built.prepare('SELECT b FROM t ORDER BY id').pluck().all(), `before same${i}`).toEqual(Array.from({ length: i }, (_, j) => j));
      built.close();
      fs.rmSync(file);
    }
    records.close();
  });

  it('refuses a moment history does not hold, naming the earliest, and a call id it does not know', async () => {
    const db = historyTarget(dataDir, 'past/edge');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    const earliest = listGenerations(localSource(dataDir, db.id))[0]!.snapshot!.at;
    const before = await read(db, { at: earliest - 60_000 });
    expect(before.ok ? undefined : before.error.code).toBe('HISTORY_OUT_OF_RANGE');
    expect(before.ok ? '' : before.error.detail).toContain(new Date(earliest).toISOString());
    const future = await read(db, { at: Date.now() + 3_600_000 });
    expect(future.ok ? undefined : future.error.code).toBe('HISTORY_OUT_OF_RANGE');
    expect(future.ok ? '' : future.error.detail).toContain(new Date(earliest).toISOString());

    const unknown = await read(db, { callId: 'nope', callKeys: [callKey('past', 'edge', 'nope')] });
    expect(unknown.ok ? undefined : unknown.error.code).toBe('AS_OF_CALL_UNKNOWN');
    // A write to another database under the id: unknown here, though it exists there.
    const other = historyTarget(dataDir, 'past/other');
    await calls.ok({ op: 'write', db: other, sql: 'CREATE TABLE u (x)', params: [], callKey: callKey('past', 'other', 'elsewhere') });
    const elsewhere = await read(db, { callId: 'elsewhere', callKeys: [callKey('past', 'edge', 'elsewhere')] });
    expect(elsewhere.ok ? undefined : elsewhere.error.code).toBe('AS_OF_CALL_UNKNOWN');
    // Another workspace's key never matches: a database holds its own workspace's records only.
    const foreign = await read(other, { callId: 'elsewhere', callKeys: [callKey('rival', 'other', 'elsewhere')] });
    expect(foreign.ok ? undefined : foreign.error.code).toBe('AS_OF_CALL_UNKNOWN');
    // A database never written has no history.
    const never = await read(historyTarget(dataDir, 'past/never'), { at: Date.now() });
    expect(never.ok ? undefined : never.error.code).toBe('HISTORY_OUT_OF_RANGE');
  });

  it('keeps the guard: a read of the past runs reads only', async () => {
    const db = historyTarget(dataDir, 'past/guard');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    const at = Date.now();
    for (const sql of ['DELETE FROM t', 'SELECT * FROM _agentdb_calls', "ATTACH 'x.db' AS x"]) {
      const out = await pool.run({ op: 'query', db, sql, params: [], maxRows: 10, asOf: { target: { at }, build: true } });
      expect(out.ok ? undefined : out.error.code, sql).toMatch(/^SQL_/);
    }
    const described = await calls.ok({ op: 'describe', db, asOf: { target: { at }, build: true } });
    expect(described).toMatchObject({ tables: [{ name: 't' }], asOf: { restoredTo: expect.any(String) } });
  });

  it('keeps a moment: the second read of it, or of another time within the same commit, restores nothing', async () => {
    const db = historyTarget(dataDir, 'past/cache');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    await calls.write(db, 'INSERT INTO t (a, b) VALUES (?, ?)', ['one', 1]);
    const first = historyRange(localSource(dataDir, db.id)).latest!;

    const unbuilt = await read(db, { at: first }, false);
    expect(unbuilt).toMatchObject({ ok: true, result: null, asOf: { needsRoom: expect.any(Number) } });
    const built = await read(db, { at: first });
    expect(built).toMatchObject({ ok: true, asOf: { materialised: true } });
    const again = await read(db, { at: first });
    expect(again).toMatchObject({ ok: true, asOf: { materialised: false } });
    // The next commit comes after a moment was restored (milliseconds of work): a time between
    // the two is another time within the same commit's state, so the same moment.
    await calls.write(db, 'INSERT INTO t (a, b) VALUES (?, ?)', ['two', 2]);
    const next = historyRange(localSource(dataDir, db.id)).latest!;
    expect(next).toBeGreaterThan(first + 1);
    expect(await read(db, { at: next - 1 }, false)).toMatchObject({ ok: true, asOf: { materialised: false } });
    expect(await read(db, { at: next }, false)).toMatchObject({ ok: true, result: null });
    expect((again as { result: { rows: unknown[] } }).result.rows).toEqual([[1, 'one', 1]]);

    // Dropped once unused for AS_OF_KEEP_MINUTES (the sweep, asked with a clock past it), and
    // restored again by the next read of it.
    const cacheDir = path.join(dataDir, AS_OF_ROOT, 'past', 'cache');
    expect(fs.readdirSync(cacheDir)).toHaveLength(1);
    expect(sweepMoments(dataDir, 15 * 60_000)).toBe(0);
    expect(fs.readdirSync(cacheDir)).toHaveLength(1);
    expect(sweepMoments(dataDir, 15 * 60_000, Date.now() + 15 * 60_000 + 1000)).toBeGreaterThanOrEqual(1);
    expect(fs.readdirSync(cacheDir)).toHaveLength(0);
    expect(await read(db, { at: first })).toMatchObject({ ok: true, asOf: { materialised: true }, result: { rows: [[1, 'one', 1]] } });
  });

  it('counts kept moments against the workspace quota, and drops them when the quota needs the room', async () => {
    const db = historyTarget(dataDir, 'roomy/a');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
    await calls.write(
      db,
      'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) INSERT INTO t (a, b) SELECT hex(randomblob(200)), i FROM n',
    );
    const at = Date.now();
    // Later than the moment read, as in as-of-dropped-moments (same millisecond: in it).
    pastMs(at);
    await calls.write(db, 'DELETE FROM t');
    const request = { op: 'query' as const, db, sql: SELECT, params: [], maxRows: 1, asOf: { target: { at } } };

    const plain = workspaceDiskUse(dataDir, 'roomy');
    expect(plain.momentBytes).toBe(0);
    const roomy = new WorkspaceQuota({ dataDir, overrides: { maxBytes: 1e12 }, planOf: async () => 'pro' });
    expect(await runAsOf(request, pool, roomy, 'roomy')).toMatchObject({ ok: true, asOf: { materialised: true } });
    const held = momentsBytes(dataDir, 'roomy');
    expect(held).toBeGreaterThan(200 * 400);
    const usage = await roomy.usage('roomy');
    expect(usage.momentBytes).toBe(held);
    expect(usage.bytes).toBe(usage.databaseBytes + usage.historyBytes + usage.ledgerBytes + held);

    // A quota that fits what the workspace holds but not the moment too: the moment stays in the
    // cache no longer than another step needs its room.
    const tight = new WorkspaceQuota({ dataDir, overrides: { maxBytes: usage.bytes - held + 1000 }, planOf: async () => 'pro' });
    await tight.check('roomy', { databases: 0, bytes: 500 }, 'a test step');
    expect(fs.existsSync(`${dataDir}/${AS_OF_ROOT}/roomy`)).toBe(false);
    // And a moment that does not fit is refused, nothing restored.
    const refused = await runAsOf(request, pool, tight, 'roomy');
    expect(refused.ok ? undefined : refused.error.code).toBe('QUOTA_EXCEEDED');
    expect(momentsBytes(dataDir, 'roomy')).toBe(0);
  });
});
