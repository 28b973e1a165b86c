import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { guardQuery, guardWrite, MAX_NAME_BYTES, type GuardVerdict } from '../../src/guard/guard.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { write } from '../../src/sqlite/sqlite-ops.ts';

const at = (bytes: number) => 'n'.repeat(bytes);
/** `日` is three UTF-8 bytes: 86 of them are 258 bytes in 86 characters. */
const wide = (chars: number) => '日'.repeat(chars);

/** Every way SQLite reads a name: bare, and in its four quoting styles (a string only where it names). */
const spellings = (name: string) => [name, `"${name}"`, `[${name}]`, `\`${name}\``];

const LONG = /is (257|258) bytes long; names of tables, views, columns, indexes and aliases may be at most 256 bytes/;

function refused(v: GuardVerdict): string {
  expect(v.ok).toBe(false);
  if (v.ok) return '';
  expect(v.code).toBe('SQL_REFUSED');
  return v.reason;
}

describe('guard: names past MAX_NAME_BYTES', () => {
  it('is 256 bytes', () => expect(MAX_NAME_BYTES).toBe(256));

  it.each([
    ['a table in CREATE TABLE', (n: string) => guardWrite(`CREATE TABLE ${n} (x)`)],
    ['a column in CREATE TABLE', (n: string) => guardWrite(`CREATE TABLE t (id INTEGER, ${n} TEXT)`)],
    ['a column in ALTER TABLE … ADD', (n: string) => guardWrite(`ALTER TABLE t ADD COLUMN ${n} TEXT`)],
    ['an alias after AS', (n: string) => guardQuery(`SELECT 1 AS ${n}`)],
    ['an alias without AS', (n: string) => guardQuery(`SELECT 1 ${n}`)],
    ['a table alias', (n: string) => guardQuery(`SELECT * FROM t ${n}`)],
    ['a column in a query', (n: string) => guardQuery(`SELECT ${n} FROM t`)],
    ['a view', (n: string) => guardWrite(`CREATE VIEW ${n} AS SELECT 1`)],
    ['an index', (n: string) => guardWrite(`CREATE INDEX ${n} ON t (x)`)],
    ['a RETURNING alias', (n: string) => guardWrite(`INSERT INTO t VALUES (1) RETURNING x AS ${n}`)],
  ])('refuses one of 257 bytes as %s, quoted or not, and allows 256', (_, verdict) => {
    for (const name of [...spellings(at(257)), ...spellings(wide(86))]) {
      expect(refused(verdict(name)), name.slice(0, 3)).toMatch(LONG);
    }
    for (const name of [...spellings(at(256)), ...spellings(wide(85))]) {
      const v = verdict(name);
      expect(v.ok, `${name.slice(0, 3)} → ${v.ok ? '' : v.reason}`).toBe(true);
    }
  });

  it('refuses a string where SQLite reads it as a name: a table slot, or after AS', () => {
    expect(refused(guardWrite(`CREATE TABLE '${at(257)}' (x)`))).toMatch(LONG);
    expect(refused(guardQuery(`SELECT * FROM '${at(257)}'`))).toMatch(LONG);
    expect(refused(guardQuery(`SELECT 1 AS '${at(257)}'`))).toMatch(LONG);
    expect(guardWrite(`CREATE TABLE '${at(256)}' (x)`).ok).toBe(true);
    expect(guardQuery(`SELECT 1 AS '${at(256)}'`).ok).toBe(true);
  });

  it('leaves long string values alone', () => {
    expect(guardQuery(`SELECT '${at(90_000)}'`).ok).toBe(true);
    expect(guardWrite(`INSERT INTO t (s) VALUES ('${at(90_000)}')`).ok).toBe(true);
    expect(guardWrite(`CREATE TABLE t (s TEXT DEFAULT '${at(5000)}')`).ok).toBe(true);
  });

  it('quotes only the start of the name in its reason', () => {
    expect(refused(guardQuery(`SELECT 1 AS ${at(90_000)}`)).length).toBeLessThan(300);
  });
});

describe('store: names a write leaves in the schema past MAX_NAME_BYTES', () => {
  const open: Database.Database[] = [];
  afterEach(() => {
    for (const db of open.splice(0)) db.close();
  });
  function database(): Database.Database {
    const db = new Database(':memory:');
    hardenConnection(db);
    open.push(db);
    return db;
  }
  let seq = 0;
  const run = (db: Database.Database, sql: string) => {
    try {
      write(db, sql, [], `c${++seq}`, PLAN_LIMITS.enterprise);
      return 'ok';
    } catch (err) {
      return `${(err as { code: string }).code}: ${(err as { detail: string }).detail}`;
    }
  };

  it('refuses a column named by a string, and a view column named by a long expression; allows a short name', () => {
    const db = database();
    expect(run(db, `CREATE TABLE t ('${at(257)}' INT)`)).toMatch(/^SQL_REFUSED: the statement made a name of 257 bytes \(table t, column n+…\)/);
    expect(run(db, 'CREATE TABLE u (x)')).toBe('ok');
    expect(run(db, `ALTER TABLE u ADD COLUMN '${at(300)}' INT`)).toMatch(/^SQL_REFUSED: the statement made a name of 300 bytes/);
    expect(run(db, `CREATE VIEW v AS SELECT '${at(90_000)}'`)).toMatch(
      /^SQL_REFUSED: the statement made a name of 90002 bytes \(view v, column 'n+…\).*name a long expression with AS/,
    );
    expect(run(db, `CREATE VIEW v AS SELECT '${at(90_000)}' AS label`)).toBe('ok');
    expect(run(db, `CREATE TABLE w ('${at(256)}' INT)`)).toBe('ok');
    // Nothing refused was left behind.
    expect(db.prepare(`SELECT name FROM sqlite_schema WHERE name IN ('t', 'v', 'w') ORDER BY name`).pluck().all()).toEqual(['v', 'w']);
    expect(db.prepare(`SELECT count(*) FROM pragma_table_xinfo('u')`).pluck().get()).toBe(1);
  });

  it('does not hold names made before the limit against later writes', () => {
    const db = database();
    db.exec(`CREATE TABLE legacy ("${at(90_000)}" TEXT, id INTEGER)`);
    expect(run(db, 'CREATE TABLE fresh (x)')).toBe('ok');
    expect(run(db, 'INSERT INTO legacy (id) VALUES (1)')).toBe('ok');
  });
});
