import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { MAX_SHARED_SCHEMA_BYTES, schemaIdentity, SharedVerdicts } from '../../src/sqlite/shared-verdicts.ts';

const open: Database.Database[] = [];

/** A hardened handle on a fresh database, its schema made by `schema` (trusted SQL). */
function database(schema: string): Database.Database {
  const db = new Database(':memory:');
  db.exec(schema);
  hardenConnection(db);
  open.push(db);
  return db;
}

afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

describe('SharedVerdicts', () => {
  it('admits a read on a second handle of the same schema from the first one’s verdict, prepared on its own handle', () => {
    const verdicts = new SharedVerdicts();
    const a = database("CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO kv VALUES (1, 'a')");
    const b = database("CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO kv VALUES (1, 'b')");
    const sql = '-- a comment first\n SELECT v FROM kv WHERE id = ?';
    const first = verdicts.check(a, sql, 'read');
    expect(first).toMatchObject({ ok: true });
    expect(verdicts.size).toBe(1);
    const second = verdicts.check(b, sql, 'read');
    expect(second).toMatchObject({ ok: true, programLength: first.ok ? first.programLength : -1 });
    expect(verdicts.size).toBe(1);
    if (!second.ok) throw new Error('refused');
    expect(second.stmt.database).toBe(b);
    expect(second.stmt.pluck().get(1)).toBe('b');
  });

  it('judges afresh on a schema that differs in anything: the same SQL admitted on one is refused on the other', () => {
    const verdicts = new SharedVerdicts();
    const table = database('CREATE TABLE t (a)');
    // As if a program outside agentdb had made it: a view over the engine's own table.
    const view = database('CREATE VIEW t AS SELECT name AS a FROM sqlite_master');
    expect(verdicts.check(table, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    expect(verdicts.check(view, 'SELECT a FROM t', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    // Only the root page differs (a table made before it): a verdict is not carried over either.
    const moved = database('CREATE TABLE first (x); CREATE TABLE t (a)');
    expect(schemaIdentity(moved).digest).not.toBe(schemaIdentity(table).digest);
    expect(verdicts.check(moved, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    expect(verdicts.size).toBe(2);
  });

  it('carries one row at most only to a schema the same to the byte, never to one where the key may repeat (review R2)', () => {
    const verdicts = new SharedVerdicts();
    const unique = 'CREATE TABLE t (id INTEGER PRIMARY KEY, k UNIQUE); INSERT INTO t VALUES (1, 7), (2, 8)';
    const repeated = 'CREATE TABLE t (id INTEGER PRIMARY KEY, k); CREATE INDEX t_k ON t (k); INSERT INTO t VALUES (1, 7), (2, 7)';
    const sql = 'SELECT id FROM t WHERE k = ?';
    const verdict = (db: Database.Database) => {
      const v = verdicts.check(db, sql, 'read');
      if (!v.ok) throw new Error(v.reason);
      return v;
    };
    const a = database(unique);
    expect(verdict(a).singleRow).toBe(true);
    // The same schema on another handle: the verdict shared, one row still at most.
    const b = database(unique);
    expect(verdict(b).singleRow).toBe(true);
    expect(verdicts.size).toBe(1);
    // The same SQL and table name, the key not unique: judged afresh, and two rows it returns.
    const c = verdict(database(repeated));
    expect(c.singleRow).toBe(false);
    expect(c.stmt.all(7)).toHaveLength(2);
    // The unique table dropped and made again without UNIQUE on a handle that judged it before.
    a.exec('DROP TABLE t; CREATE TABLE t (id INTEGER PRIMARY KEY, k); CREATE INDEX t_k ON t (k); INSERT INTO t VALUES (1, 7), (2, 7)');
    const again = verdict(a);
    expect(again.singleRow).toBe(false);
    expect(again.stmt.all(7)).toHaveLength(2);
  });

  it('takes a schema change on the same handle into account', () => {
    const verdicts = new SharedVerdicts();
    const db = database('CREATE TABLE t (a)');
    expect(verdicts.check(db, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    const before = schemaIdentity(db).digest;
    db.exec('DROP TABLE t; CREATE VIEW t AS SELECT name AS a FROM sqlite_master');
    expect(schemaIdentity(db).digest).not.toBe(before);
    expect(verdicts.check(db, 'SELECT a FROM t', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });

  it('judges in full, sharing nothing, the reads of a schema too large to hash; shares those of one under the cap', () => {
    // Review R3: a tenant's schema grown by large DEFAULTs was read into JavaScript and hashed
    // on every handle's first miss and after every schema change, writes included.
    const defaults = (n: number) => `CREATE TABLE t (a, b DEFAULT '${'x'.repeat(n)}')`;
    const verdicts = new SharedVerdicts();
    const bigA = database(defaults(MAX_SHARED_SCHEMA_BYTES));
    const bigB = database(defaults(MAX_SHARED_SCHEMA_BYTES));
    expect(schemaIdentity(bigA).digest).toBeUndefined();
    expect(schemaIdentity(bigA).bytes).toBeGreaterThan(MAX_SHARED_SCHEMA_BYTES);
    bigB.exec('INSERT INTO t (a) VALUES (1)');
    for (const db of [bigA, bigB]) {
      const read = verdicts.check(db, 'SELECT a FROM t', 'read');
      expect(read).toMatchObject({ ok: true });
      if (read.ok) expect(read.stmt.database).toBe(db);
      expect(verdicts.check(db, 'SELECT * FROM sqlite_master', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    }
    expect(verdicts.size).toBe(0);
    expect((verdicts.check(bigB, 'SELECT a FROM t', 'read') as { stmt: Database.Statement }).stmt.pluck().all()).toEqual([1]);

    const small = defaults(MAX_SHARED_SCHEMA_BYTES - 100);
    const smallA = database(small);
    const smallB = database(small);
    expect(schemaIdentity(smallA).digest).toBe(schemaIdentity(smallB).digest);
    expect(schemaIdentity(smallA).digest).toMatch(/^[0-9a-f]{64}$/);
    for (const db of [smallA, smallB]) expect(verdicts.check(db, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    expect(verdicts.size).toBe(1);
  });

  it('keeps neither refusals nor any verdict but a read’s', () => {
    const verdicts = new SharedVerdicts();
    const db = database('CREATE TABLE t (a)');
    expect(verdicts.check(db, 'SELECT * FROM sqlite_master', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    expect(verdicts.check(db, 'SELECT a FROM nope', 'read')).toMatchObject({ ok: false, code: 'SQL_ERROR' });
    expect(verdicts.check(db, 'INSERT INTO t VALUES (1)', 'write')).toMatchObject({ ok: true });
    expect(verdicts.size).toBe(0);
  });
});
