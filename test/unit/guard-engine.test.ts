import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StatementKind } from '../../src/guard/classifier.ts';
import { engineCheck, hardenConnection, prepareChecked, schemaFingerprint, type CheckMode } from '../../src/guard/engine-check.ts';
import { tempDb, type TempDb } from './guard-cases/db.ts';

let tmp: TempDb;
beforeEach(() => {
  tmp = tempDb();
});
afterEach(() => tmp.close());

describe('prepareChecked: both layers', () => {
  it('hands back runnable statements for ordinary reads and writes', () => {
    const read = prepareChecked(tmp.db, 'SELECT b FROM t ORDER BY a', 'read');
    expect(read.ok && read.stmt.pluck().all()).toEqual(['one', 'two', 'three']);
    const json = prepareChecked(tmp.db, "SELECT value FROM json_each('[1,2]') UNION ALL SELECT key FROM json_tree('{\"k\":1}')", 'read');
    expect(json.ok && json.stmt.all()).toHaveLength(4);
    const writes = [
      "INSERT INTO t (b) VALUES ('four') RETURNING a",
      "INSERT INTO u VALUES (3, 'a', NULL) ON CONFLICT (y) DO UPDATE SET x = excluded.x",
      'DELETE FROM p WHERE id = 1',
      'CREATE TABLE n (a UNIQUE, b CHECK (b > 0), c AS (a + 1), d INTEGER PRIMARY KEY AUTOINCREMENT)',
      'CREATE TABLE IF NOT EXISTS n (a)',
      'CREATE UNIQUE INDEX IF NOT EXISTS n_a ON n(a) WHERE a > 0',
      'CREATE VIEW nv AS SELECT * FROM n',
      'CREATE TABLE n2 AS SELECT * FROM t',
      'ALTER TABLE n ADD COLUMN e CHECK (e > 0)',
      'ALTER TABLE n RENAME COLUMN e TO f',
      'ALTER TABLE t RENAME TO t2',
      'DELETE FROM t2',
    ];
    for (const sql of writes) {
      const w = prepareChecked(tmp.db, sql, 'write');
      expect(w, sql).toMatchObject({ ok: true });
      if (w.ok) w.stmt.run();
    }
    expect(tmp.db.prepare('SELECT count(*) FROM c').pluck().get()).toBe(1); // the cascade ran
  });

  it("refuses the engine's and agentdb's tables under any spelling, in one layer or the other", () => {
    for (const sql of [
      "SELECT * FROM 'sqlite_master'",
      'SELECT * FROM "_agentdb_calls"',
      'SELECT * FROM main.[sqlite_schema]',
      'SELECT * FROM tv, _AGENTDB_CALLS',
    ]) {
      expect(prepareChecked(tmp.db, sql, 'read'), sql).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    }
  });

  it('refuses the temp schema', () => {
    tmp.db.exec('CREATE TEMP TABLE scratch (a)');
    expect(prepareChecked(tmp.db, 'SELECT * FROM temp.scratch', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    // Unqualified, the name resolves to the temp table: only the bytecode can tell.
    expect(prepareChecked(tmp.db, 'SELECT * FROM scratch', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED', reason: expect.stringMatching(/temp/) });
    expect(prepareChecked(tmp.db, 'INSERT INTO scratch VALUES (1)', 'write')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });

  it("maps SQLite's own errors to registry codes", () => {
    expect(prepareChecked(tmp.db, 'SELECT * FROM nope', 'read')).toMatchObject({
      ok: false,
      code: 'SQL_ERROR',
      reason: expect.stringContaining('no such table'),
    });
    expect(prepareChecked(tmp.db, 'SELECT FROM WHERE', 'read')).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
    expect(prepareChecked(tmp.db, 'SELECT 1 /*', 'read')).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
    expect(prepareChecked(tmp.db, 'INSERT INTO t VALUES (1, 2, 3)', 'write')).toMatchObject({ ok: false, code: 'SQL_ERROR' });
    expect(prepareChecked(tmp.db, 'SELECT 1; SELECT 2', 'read')).toMatchObject({ ok: false, code: 'SQL_MULTIPLE_STATEMENTS' });
  });

  it('accepts leading comments and empty statements, preparing the statement itself', () => {
    const r = prepareChecked(tmp.db, ';; /* lead */ -- x\n SELECT 1 AS one; -- trailing', 'read');
    expect(r.ok && r.stmt.get()).toEqual({ one: 1 });
  });

  it('never prepares a refused PRAGMA, since preparing one applies it', () => {
    for (const mode of ['read', 'write', 'introspect'] as const) {
      expect(prepareChecked(tmp.db, 'PRAGMA trusted_schema = ON', mode)).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    }
    expect(tmp.db.pragma('trusted_schema', { simple: true })).toBe(0);
  });

  it('keeps judging virtual tables when an agent table named json_each hides the function', () => {
    tmp.db.exec('CREATE TABLE json_each (a)');
    expect(prepareChecked(tmp.db, "SELECT * FROM json_tree('[1]')", 'read')).toMatchObject({ ok: true });
    expect(prepareChecked(tmp.db, "SELECT * FROM json_each('[1]')", 'read')).toMatchObject({ ok: false, code: 'SQL_ERROR' });
    expect(prepareChecked(tmp.db, 'SELECT * FROM json_each', 'read')).toMatchObject({ ok: true });
  });

  it('runs the introspection PRAGMAs in introspect mode only', () => {
    const info = prepareChecked(tmp.db, 'PRAGMA table_info(t)', 'introspect');
    expect(info.ok && info.stmt.all().map((r) => (r as { name: string }).name)).toEqual(['a', 'b']);
    for (const sql of ['PRAGMA foreign_key_check', 'PRAGMA main.index_list(u)', 'PRAGMA foreign_key_list(c)']) {
      expect(prepareChecked(tmp.db, sql, 'introspect'), sql).toMatchObject({ ok: true });
    }
    expect(prepareChecked(tmp.db, 'PRAGMA table_info(t)', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });
});

/** Layer 2 judged alone, as if layer 1 had been fooled into the given kind. */
const ALONE: ReadonlyArray<[sql: string, mode: CheckMode, kind: StatementKind, reason: RegExp]> = [
  ['INSERT INTO t (b) VALUES (1)', 'read', 'select', /would write/],
  ['DELETE FROM t', 'read', 'select', /would write/],
  ['SELECT * FROM sqlite_master', 'read', 'select', /sqlite_schema/],
  ['SELECT * FROM "sqlite_schema"', 'read', 'select', /sqlite_schema/],
  ['SELECT * FROM sqlite_sequence', 'read', 'select', /engine's own/],
  ['SELECT * FROM _agentdb_calls', 'read', 'select', /internal to agentdb/],
  ['SELECT id FROM _agentdb_calls WHERE id = 1', 'read', 'select', /internal to agentdb/],
  ['SELECT * FROM temp.sqlite_master', 'read', 'select', /temp/],
  ['SELECT * FROM pragma_table_list', 'read', 'select', /virtual table/],
  ["SELECT * FROM json_each('[1]') AS pragma_table_list, pragma_table_info('t') AS json_each", 'read', 'select', /virtual table/],
  ['SELECT * FROM dbstat', 'read', 'select', /virtual table/],
  ["SELECT load_extension('x')", 'read', 'select', /load_extension/],
  ["SELECT sqlite_log(1, 'x')", 'read', 'select', /internal function/],
  ['SELECT * FROM leak_view', 'read', 'select', /sqlite_schema/],
  ['SELECT * FROM calls_view', 'read', 'select', /internal to agentdb/],
  ['SELECT * FROM pragma_view', 'read', 'select', /unsafe use of virtual table/],
  ['INSERT INTO t (b) SELECT name FROM sqlite_master', 'write', 'insert', /sqlite_schema/],
  ['UPDATE sqlite_sequence SET seq = 0', 'write', 'update', /engine's own/],
  ['DELETE FROM _agentdb_calls', 'write', 'delete', /internal to agentdb/],
  ['CREATE TABLE x AS SELECT * FROM sqlite_master', 'write', 'create_table', /sqlite_schema/],
  ['CREATE TEMP TABLE y (a)', 'write', 'create_table', /temp/],
  ['CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END', 'write', 'create_table', /trigger/],
  ['CREATE VIRTUAL TABLE f USING fts5(a)', 'write', 'create_table', /VBegin|VCreate/],
  ['DROP TABLE u', 'write', 'insert', /sqlite_schema|never allowed/],
  ['DROP TABLE u', 'write', 'create_table', /Destroy|never allowed/],
  ['ALTER TABLE u DROP COLUMN x', 'write', 'alter_table', /sqlite_drop_column/],
  ['ALTER TABLE u RENAME TO _agentdb_u', 'write', 'alter_table', /internal to agentdb/],
  ['VACUUM', 'write', 'insert', /Vacuum/],
  ["ATTACH ':memory:' AS a2", 'write', 'insert', /sqlite_attach/],
  ['BEGIN', 'write', 'insert', /AutoCommit/],
  ['SAVEPOINT sp', 'write', 'insert', /Savepoint/],
  ['ANALYZE', 'write', 'create_table', /./],
];

describe('engineCheck: layer 2 stands without layer 1', () => {
  beforeEach(() => {
    // Objects no agent could have made, as if something had slipped past the guard before.
    tmp.db.exec(`
      CREATE VIEW leak_view AS SELECT * FROM sqlite_master;
      CREATE VIEW calls_view AS SELECT * FROM _agentdb_calls;
      CREATE VIEW pragma_view AS SELECT * FROM pragma_table_list;
    `);
  });

  for (const [sql, mode, kind, reason] of ALONE) {
    it(`${mode}/${kind}: ${sql}`, () => {
      const before = schemaFingerprint(tmp.db);
      const r = engineCheck(tmp.db, sql, mode, kind);
      expect(r).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
      if (!r.ok) expect(r.reason).toMatch(reason);
      expect(schemaFingerprint(tmp.db)).toEqual(before);
    });
  }

  it('lets the same checks pass what agents legitimately run', () => {
    expect(engineCheck(tmp.db, "INSERT INTO t (b) VALUES ('x')", 'write', 'insert')).toMatchObject({ ok: true });
    expect(engineCheck(tmp.db, 'SELECT * FROM tv JOIN u ON u.x = tv.a', 'read', 'select')).toMatchObject({ ok: true });
  });
});

describe('hardenConnection and schemaFingerprint', () => {
  it('turns trusted_schema off, keeps defensive mode on and load_extension() disabled', () => {
    tmp.db.pragma('trusted_schema = ON');
    tmp.db.unsafeMode(true);
    hardenConnection(tmp.db);
    expect(tmp.db.pragma('trusted_schema', { simple: true })).toBe(0);
    tmp.db.exec('PRAGMA writable_schema = ON'); // defensive mode ignores it
    expect(tmp.db.pragma('writable_schema', { simple: true })).toBe(0);
    expect(() => tmp.db.exec("UPDATE sqlite_master SET sql = 'x'")).toThrow(/may not be modified/);
    expect(() => tmp.db.prepare("SELECT load_extension('x')").get()).toThrow(/not authorized/);
  });

  it('lists type:name sorted, with the temp schema counted', () => {
    const fp = schemaFingerprint(tmp.db);
    expect(fp).toEqual([...fp].sort());
    expect(fp).toContain('table:t');
    expect(fp).toContain('index:sqlite_autoindex_u_1');
    expect(fp).toContain('view:tv');
    expect(fp).toContain('temp_schema:0');
    tmp.db.exec('CREATE TEMP TABLE s (a); CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END');
    const after = schemaFingerprint(tmp.db);
    expect(after).toContain('temp_schema:1');
    expect(after).toContain('trigger:tr');
  });
});
