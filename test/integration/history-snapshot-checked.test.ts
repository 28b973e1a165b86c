import fs from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/layout.ts';
import type { ExecutorPool } from '../../src/store/executor-pool.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// A restore built from a snapshot that passed PRAGMA integrity_check when it was made (held to
// its checksums) plus committed frames is not checked again: that check read every page a
// second time. So a snapshot must be marked only when it passed, and one that did not must
// still have each restore from it checked.

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-checked-', { handleCacheSize: 4, checkpointBytes: 64 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, nextKey } = historyCalls(() => pool);
const newest = (id: string) => listGenerations(localSource(dataDir, id)).at(-1)!;

describe('snapshots checked as they are made', () => {
  it('a sound database\'s snapshot is marked checked, a fork from it equals the moment and its linked generation keeps the mark', async () => {
    const db = historyTarget(dataDir, 'checked/sound');
    const write = (sql: string) => ok({ op: 'write', db, sql, params: [], callKey: nextKey() });
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)');
    await write('CREATE INDEX ta ON t(a)');
    await write("INSERT INTO t(a, b) SELECT printf('a%05d', i), printf('b%05d', 999 - i) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) SELECT i FROM n)");
    await ok({ op: 'snapshot', db, reason: 'manual' });
    expect(newest(db.id).snapshot!.checked).toBe(true);
    await write("UPDATE t SET b = 'changed' WHERE id % 7 = 0");
    const at = Date.now();
    pastMs(at);
    const want = dumpHash(db.path, { withoutAudit: true });
    await write('DELETE FROM t');
    const fork = historyTarget(dataDir, 'checked/fork');
    await ok({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(want);
    expect(integrity(fork.path)).toBe('ok');
    expect(newest(fork.id).snapshot!.checked).toBe(true);
  }, 60_000);

  it('a snapshot of a database damaged on disk is not marked, and a restore from it is refused by PRAGMA integrity_check', async () => {
    const db = historyTarget(dataDir, 'checked/damaged');
    const write = (sql: string) => ok({ op: 'write', db, sql, params: [], callKey: nextKey() });
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)');
    await write('CREATE INDEX ti ON t(a)');
    await write("INSERT INTO t(a, b) SELECT printf('a%05d', i), printf('b%05d', 999 - i) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) SELECT i FROM n)");
    const sound = Date.now();
    pastMs(sound);
    // A program outside agentdb rewrites the schema behind SQLite's back: the index now claims to
    // be on b while it holds a's values. Every query still runs; integrity_check finds it.
    const outside = new Database(db.path);
    outside.unsafeMode(true);
    outside.pragma('writable_schema = ON');
    outside.prepare("UPDATE sqlite_schema SET sql = 'CREATE INDEX ti ON t(b)' WHERE name = 'ti'").run();
    outside.close();
    expect(integrity(db.path)).not.toBe('ok');
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const damaged = newest(db.id);
    expect(damaged.snapshot!.checked, 'a snapshot that fails integrity_check marked checked').toBeUndefined();
    const at = Date.now();
    pastMs(at);
    const fork = historyTarget(dataDir, 'checked/damaged-fork');
    const out = await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code, 'a fork of a damaged snapshot made without a check').toBe('HISTORY_CORRUPT');
    expect((out as { error: { detail: string } }).error.detail).toContain('integrity_check');
    expect(fs.existsSync(fork.path)).toBe(false);
    // Before the damage, the checked generation still forks.
    const before = historyTarget(dataDir, 'checked/before-fork');
    await ok({ op: 'restoreInto', db: before, source: db.id, from: db, at: sound, by, timeoutMs: 60_000 });
    expect(integrity(before.path)).toBe('ok');
  }, 60_000);
});
