import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { classify, type StatementKind } from '../../src/guard/classifier.ts';
import { PRAGMA_NAMES } from '../../src/guard/names.ts';
import { tableSlots } from '../../src/guard/rules.ts';
import { isTrivia, tokenize, type Token } from '../../src/guard/tokenizer.ts';

function tokens(sql: string): Token[] {
  const r = tokenize(sql);
  if (!r.ok) throw new Error(r.reason);
  return r.tokens.filter((t) => !isTrivia(t));
}

const kindOf = (sql: string) => classify(tokens(sql)).kind;

describe('classifier', () => {
  const cases: ReadonlyArray<[string, StatementKind]> = [
    ['SELECT 1', 'select'],
    ['VALUES (1)', 'select'],
    ['WITH x AS (SELECT 1) SELECT * FROM x', 'select'],
    ['WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x WHERE n < (SELECT (3))) SELECT * FROM x', 'select'],
    ['WITH a AS MATERIALIZED (SELECT 1), b AS NOT MATERIALIZED (SELECT 2) VALUES (1)', 'select'],
    ['WITH "a b"(x, "y") AS (SELECT 1, 2) INSERT INTO t SELECT * FROM "a b"', 'insert'],
    ["WITH 'q' AS (SELECT 1) DELETE FROM t", 'delete'],
    ['WITH x AS (SELECT (1)) UPDATE t SET a = 1', 'update'],
    ['WITH x AS (SELECT 1) REPLACE INTO t SELECT * FROM x', 'replace'],
    ['WITH x AS (SELECT 1) DROP TABLE t', 'drop'],
    ['INSERT OR REPLACE INTO t VALUES (1)', 'insert'],
    ['REPLACE INTO t VALUES (1)', 'replace'],
    ['CREATE TABLE t (a)', 'create_table'],
    ['CREATE TEMP TABLE t (a)', 'create_table'],
    ['CREATE UNIQUE INDEX i ON t(a)', 'create_index'],
    ['CREATE VIEW v AS SELECT 1', 'create_view'],
    ['CREATE TEMPORARY TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END', 'create_trigger'],
    ['CREATE VIRTUAL TABLE f USING fts5(a)', 'create_virtual_table'],
    ['ALTER TABLE t ADD b', 'alter_table'],
    ['DROP VIEW v', 'drop'],
    ['PRAGMA x', 'pragma'],
    ['ATTACH x AS y', 'attach'],
    ['DETACH y', 'detach'],
    ['VACUUM', 'vacuum'],
    ['ANALYZE', 'analyze'],
    ['REINDEX', 'reindex'],
    ['BEGIN', 'begin'],
    ['COMMIT', 'commit'],
    ['END', 'commit'],
    ['ROLLBACK', 'rollback'],
    ['SAVEPOINT s', 'savepoint'],
    ['RELEASE s', 'release'],
    ['EXPLAIN SELECT 1', 'explain'],
    ['"SELECT" 1', 'unknown'],
    ['(SELECT 1)', 'unknown'],
    ['WITH x AS (SELECT 1', 'unknown'],
    ['WITH x (SELECT 1) SELECT 1', 'unknown'],
    ['WITH x AS (SELECT 1)', 'unknown'],
    ['CREATE x', 'unknown'],
  ];
  for (const [sql, kind] of cases) {
    it(`${sql} → ${kind}`, () => expect(kindOf(sql)).toBe(kind));
  }

  it('marks CREATE TEMP/TEMPORARY and only those', () => {
    expect(classify(tokens('CREATE TEMP VIEW v AS SELECT 1')).temp).toBe(true);
    expect(classify(tokens('create temporary table t(a)')).temp).toBe(true);
    expect(classify(tokens('CREATE TABLE temp_c (temp)')).temp).toBe(false);
  });

  it('points at the verb after a WITH clause', () => {
    const t = tokens('WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x');
    expect(t[classify(t).verb]!.value).toBe('insert');
  });
});

describe('table slots', () => {
  /** Each case: SQL, the names SQLite reads as tables there, and names it reads as values. */
  const cases: ReadonlyArray<[sql: string, slots: string[], values: string[]]> = [
    ["SELECT 'v' FROM a, 'b' JOIN c ON 'y' = x, (d) WHERE e IN f", ['a', "'b'", 'c', 'd', 'f'], ["'v'", "'y'", 'x', 'e']],
    ['INSERT OR IGNORE INTO a SELECT * FROM b', ['a', 'b'], []],
    ['UPDATE OR REPLACE a SET x = 1 FROM b, c', ['a', 'b', 'c'], ['x']],
    ['CREATE INDEX IF NOT EXISTS i ON a(x)', ['i', 'a'], ['x']],
    ['SELECT * FROM a INDEXED BY i ORDER BY x', ['a', 'i'], ['x']],
    ["SELECT f('a', 'b') FROM t WHERE x IN ('c', 'd') ORDER BY 'e'", ['t'], ["'a'", "'b'", "'c'", "'d'", "'e'"]],
    ["INSERT INTO t VALUES ('a'), ('b')", ['t'], ["'a'", "'b'"]],
    ["SELECT * FROM json_each('a'), t", ['json_each', 't'], ["'a'"]],
    ["SELECT * FROM (SELECT 'a' FROM b) AS s, ('c')", ['b', "'c'"], ["'a'"]],
    ["ALTER TABLE a RENAME TO 'b'", ['a', "'b'"], []],
  ];
  for (const [sql, slots, values] of cases) {
    it(sql, () => {
      const t = tokens(sql);
      const marks = tableSlots(t);
      const slotted = new Set(t.filter((_, i) => marks[i]).map((x) => x.text));
      for (const name of slots) expect(slotted.has(name), `${name} should be a table slot`).toBe(true);
      for (const name of values) expect(slotted.has(name), `${name} should be a value`).toBe(false);
    });
  }
});

describe('names', () => {
  it('knows every pragma this SQLite knows, so each pragma_* table function is refused by name', () => {
    const db = new Database(':memory:');
    try {
      const engine = db.prepare('SELECT name FROM pragma_pragma_list').pluck().all() as string[];
      expect(engine.filter((name) => !PRAGMA_NAMES.has(name))).toEqual([]);
    } finally {
      db.close();
    }
  });
});
