import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { drop, query, toOpError, write, type Param } from '../../src/sqlite/sqlite-ops.ts';
import { cachedStatement } from '../../src/sqlite/statement-cache.ts';

// DATA_QUERY_SQL runs a statement the cache judged before, and SQLite calls read-only, without
// the BEGIN/ROLLBACK around it (issue 31): no rollback undoes what such a read might leave. These
// attacks must stay harmless on that path: each admitted read runs twice (the second a cache hit)
// and must leave every setting, row, temp object and lock as it found them; each writer or
// setting must be refused in both read modes, also when the write tool cached the same text.
let dataDir: string;
let handles: HandleCache;
let n = 0;
let seq = 0;

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-fast-path-'));
});
afterEach(() => handles?.closeAll());
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function target(): DbTarget {
  handles ??= new HandleCache({ size: 16 });
  const agent = `a${++n}`;
  return { id: `ws/${agent}`, path: databasePath(dataDir, 'ws', agent, 0), shard: 0, limits: PLAN_LIMITS.pro };
}
const open = (t: DbTarget) => handles.open(t, 'write');
const run = (t: DbTarget, sql: string, params: Param[] = []) => write(open(t), sql, params, `call-${++seq}`, t.limits);

/** Everything a read must leave as it found it, read through agentdb's own statements. */
function state(db: Database.Database): unknown {
  const pragmas = [
    'schema_version',
    'data_version',
    'user_version',
    'application_id',
    'trusted_schema',
    'temp_store',
    'query_only',
    'foreign_keys',
    'cache_size',
    'journal_mode',
    'synchronous',
    'recursive_triggers',
    'defer_foreign_keys',
    'busy_timeout',
    'wal_autocheckpoint',
    'reverse_unordered_selects',
    'automatic_index',
    'cell_size_check',
    'secure_delete',
    'locking_mode',
    'page_count',
    'freelist_count',
  ];
  return {
    pragmas: Object.fromEntries(pragmas.map((p) => [p, db.pragma(p, { simple: true })])),
    changes: db.prepare('SELECT total_changes()').pluck().get(),
    temp: db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get(),
    schema: db.prepare('SELECT type, name, sql FROM main.sqlite_schema ORDER BY name').all(),
    inTransaction: db.inTransaction,
  };
}

function outcome(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (err) {
    return toOpError(err).code;
  }
}

/** Reads admitted by the guard that must change nothing, the second run of each taking the fast path. */
const READS = [
  'SELECT * FROM kv',
  'SELECT v FROM kv WHERE id = 1',
  'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50) SELECT x, (SELECT v FROM kv WHERE id = x) FROM c',
  'VALUES (1, 2), (3, 4)',
  'SELECT random(), randomblob(4), changes(), total_changes(), last_insert_rowid(), sqlite_version()',
  "SELECT key, value FROM json_each('[1,2,3]')",
  'SELECT * FROM kv_view',
  '/* ; DELETE FROM kv; */ SELECT count(*) FROM kv -- ; DROP TABLE kv',
  'SELECT "ѵ" FROM (SELECT 1 AS "ѵ")',
  'SELECT seq FROM (SELECT 1 AS seq)',
  'SELECT * FROM kv ORDER BY v DESC LIMIT 1 OFFSET 1',
];

/** Statements the guard must refuse as reads, whatever ran before under the same text. */
const REFUSED = [
  "INSERT INTO kv VALUES (9, 'x') RETURNING *",
  "WITH x AS (SELECT 1) INSERT INTO kv SELECT 10, 'y' FROM x RETURNING id",
  "UPDATE kv SET v = 'z' RETURNING v",
  'DELETE FROM kv RETURNING id',
  'SELECT * FROM sqlite_sequence',
  'SELECT * FROM sqlite_master',
  "SELECT * FROM pragma_table_info('kv')",
  'SELECT * FROM pragma_cache_size(5)',
  'SELECT * FROM pragma_optimize(65538)',
  "SELECT * FROM pragma_journal_mode('delete')",
  'PRAGMA cache_size = 5',
  'PRAGMA cache_size(5)',
  'PRAGMA query_only(1)',
  'PRAGMA wal_checkpoint(TRUNCATE)',
  'PRAGMA optimize',
  "SELECT load_extension('x')",
  'BEGIN',
  'SAVEPOINT s',
  "ATTACH ':memory:' AS m",
  'CREATE TEMP TABLE t(x)',
  'SELECT 1; SELECT 2',
  'SELECT * FROM temp.sqlite_schema',
  'SELECT * FROM dbstat',
  'ANALYZE',
];

function seeded(): { t: DbTarget; db: Database.Database } {
  const t = target();
  run(t, 'CREATE TABLE kv (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)');
  run(t, "INSERT INTO kv (v) VALUES ('a'), ('b'), ('c')");
  run(t, 'CREATE VIEW kv_view AS SELECT id, upper(v) AS v FROM kv');
  return { t, db: open(t) };
}

describe('a read judged before, run without BEGIN/ROLLBACK', () => {
  it('changes nothing: no row, no setting, no temp object, no open transaction or busy statement', () => {
    const { db } = seeded();
    const before = state(db);
    for (const mode of ['read', 'introspect'] as const) {
      for (const sql of READS) {
        const first = outcome(() => query(db, sql, [], 100, 1e6, mode));
        expect(cachedStatement(db, sql, mode), sql).toBeDefined();
        const second = outcome(() => query(db, sql, [], 100, 1e6, mode));
        if (!sql.includes('random')) expect(second, sql).toEqual(first);
        // Cut at its cap: the iterated statement must be reset, not left holding a read.
        query(db, sql, [], 1, 1e6, mode);
        expect(cachedStatement(db, sql, mode)!.busy, sql).toBe(false);
        expect(state(db), sql).toEqual(before);
      }
    }
  });

  it('refuses every writer, setting and internal read in read and introspect modes, also after the same text ran as a write', () => {
    const { t, db } = seeded();
    const before = state(db);
    for (const sql of REFUSED) {
      for (const mode of ['read', 'introspect'] as const) {
        const r = outcome(() => query(db, sql, [], 100, 1e6, mode));
        expect(typeof r, `${mode}: ${sql}`).toBe('string');
        expect(cachedStatement(db, sql, mode), sql).toBeUndefined();
        expect(state(db), `${mode}: ${sql}`).toEqual(before);
      }
    }
    // The write tool caches its statement under 'write'; the read tool must still judge it.
    const returning = "INSERT INTO kv (v) VALUES ('w') RETURNING id";
    run(t, returning);
    const after = state(open(t));
    expect(cachedStatement(db, returning, 'write')).toBeDefined();
    for (let i = 0; i < 2; i++) {
      expect(outcome(() => query(db, returning, [], 100, 1e6))).toBe('SQL_REFUSED');
      expect(outcome(() => query(db, returning, [], 100, 1e6, 'introspect'))).toBe('SQL_REFUSED');
    }
    expect(state(db)).toEqual(after);
  });

  it('introspection PRAGMAs with an argument read only, also when cached', () => {
    const { db } = seeded();
    const before = state(db);
    for (const sql of ['PRAGMA table_info(kv)', 'PRAGMA main.index_list(kv)', 'PRAGMA foreign_key_check', 'PRAGMA table_list', 'PRAGMA index_info(1)']) {
      const first = outcome(() => query(db, sql, [], 100, 1e6, 'introspect'));
      expect(
        outcome(() => query(db, sql, [], 100, 1e6, 'introspect')),
        sql,
      ).toEqual(first);
      expect(
        outcome(() => query(db, sql, [], 100, 1e6, 'read')),
        sql,
      ).toBe('SQL_REFUSED');
      expect(state(db), sql).toEqual(before);
    }
  });

  it('re-judges after the schema changes: a view replaced, a table dropped', () => {
    const { t, db } = seeded();
    const sql = 'SELECT * FROM kv_view';
    query(db, sql, [], 100, 1e6);
    expect(cachedStatement(db, sql, 'read')).toBeDefined();
    drop(open(t), 'kv_view', `call-${++seq}`);
    expect(cachedStatement(db, sql, 'read')).toBeUndefined();
    run(t, 'CREATE VIEW kv_view AS SELECT id, v || v AS v FROM kv');
    expect(query(db, sql, [], 100, 1e6).rows[0]).toEqual([1, 'aa']);
    run(t, 'ALTER TABLE kv ADD COLUMN w TEXT');
    expect(cachedStatement(db, sql, 'read')).toBeUndefined();
  });

  it('runs a miss in the rolled-back transaction and only a cached read-only hit without it', () => {
    const { t, db } = seeded();
    run(t, `INSERT INTO kv (v) VALUES ('${'x'.repeat(200)}')`);
    // The spill opener runs while the rows are read: it sees whether a transaction is open then.
    const seen: boolean[] = [];
    const spy = () => {
      seen.push(db.inTransaction);
      throw new Error('spill refused');
    };
    const sql = 'SELECT v FROM kv ORDER BY id';
    for (let i = 0; i < 2; i++) {
      expect(() => query(db, sql, [], 100, 120, 'read', spy)).toThrow('spill refused');
      expect(db.inTransaction).toBe(false);
      expect(cachedStatement(db, sql, 'read')!.busy).toBe(false);
    }
    expect(seen).toEqual([true, false]);
    // A write evicts the statement: its next run is judged again, in the transaction.
    run(t, 'CREATE INDEX kv_v ON kv (v)');
    expect(() => query(db, sql, [], 100, 120, 'read', spy)).toThrow('spill refused');
    expect(seen).toEqual([true, false, true]);
  });

  it('on the empty database every absent database shares, leaves nothing another agent would see', () => {
    const a = target();
    const b = target();
    const shared = handles.open(a, 'query');
    expect(handles.open(b, 'query')).toBe(shared);
    const before = state(shared);
    for (const sql of [...READS, ...REFUSED]) {
      for (const mode of ['read', 'introspect'] as const) {
        for (let i = 0; i < 2; i++) outcome(() => query(handles.open(a, 'query'), sql, [], 100, 1e6, mode));
        expect(state(handles.open(b, 'query')), `${mode}: ${sql}`).toEqual(before);
      }
    }
    expect(fs.existsSync(a.path)).toBe(false);
  });

  it('a read that fails part way, or is cut, leaves no read open behind it', () => {
    const { t, db } = seeded();
    const before = state(db);
    // json() fails on the second row, after one row was read.
    run(t, "INSERT INTO kv (v) VALUES ('not json')");
    const failing = "SELECT json(CASE WHEN id = 1 THEN '[1]' ELSE v END) FROM kv ORDER BY id";
    const after = state(db);
    expect(after).not.toEqual(before);
    for (let i = 0; i < 3; i++) {
      expect(outcome(() => query(db, failing, [], 100, 1e6))).toBe('SQL_ERROR');
      expect(cachedStatement(db, failing, 'read')?.busy ?? false).toBe(false);
      expect(query(db, 'SELECT v FROM kv ORDER BY id', [], 1, 1e6).truncated).toBe(true);
      expect(cachedStatement(db, 'SELECT v FROM kv ORDER BY id', 'read')!.busy).toBe(false);
      expect(state(db)).toEqual(after);
    }
    // No read left open: another connection can truncate the WAL, so nothing holds a snapshot.
    const other = new Database(t.path);
    try {
      other.prepare("UPDATE kv SET v = 'changed' WHERE id = 1").run();
      expect(other.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
    } finally {
      other.close();
    }
    expect(query(db, 'SELECT v FROM kv ORDER BY id', [], 1, 1e6).rows).toEqual([['changed']]);
  });
});
