import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { Op } from '../../src/guard/bytecode.ts';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { singleRow } from '../../src/guard/single-row.ts';

const db = new Database(':memory:');
hardenConnection(db);
db.exec(`
  CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT);
  CREATE TABLE u (a, b UNIQUE, c);
  CREATE INDEX kv_v ON kv(v);
  INSERT INTO kv SELECT value, 'v' || (value % 7) FROM json_each('[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]');
  INSERT INTO u SELECT value, value * 10, NULL FROM json_each('[1,2,3,4,5]');
`);
afterAll(() => db.close());

const program = (sql: string) => {
  const slots = (sql.match(/\?/g) ?? []).length;
  return db.prepare(`EXPLAIN ${sql}`).all(...Array<null>(slots).fill(null)) as Op[];
};

const ONE = [
  'SELECT v FROM kv WHERE id = ?',
  'SELECT * FROM kv WHERE id = ? AND v = ?',
  'SELECT a, c FROM u WHERE b = ?',
  'SELECT count(*) FROM kv',
  'SELECT 1',
  "SELECT ? + 1, 'x' || ?",
  'SELECT DISTINCT v FROM kv WHERE id = ?',
];
const MANY = [
  'SELECT v FROM kv',
  'SELECT v FROM kv WHERE id > ?',
  'SELECT v FROM kv WHERE v = ?',
  'SELECT 1 UNION ALL SELECT 2',
  'SELECT v FROM kv WHERE id IN (1, 2)',
  'SELECT (SELECT v FROM kv WHERE id = 1)',
  "SELECT value FROM json_each('[1,2]')",
  'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) SELECT x FROM c',
  'SELECT v, count(*) FROM kv GROUP BY v',
  'SELECT * FROM kv, u WHERE kv.id = ?',
  'SELECT u.a FROM kv JOIN u ON u.b = kv.id WHERE kv.id = ?',
  // One row at most, but `Prev` (a loop never taken) and LIMIT's counter are not read: a no costs only the iterator.
  'SELECT max(id) FROM kv',
  'SELECT v FROM kv WHERE id = ? LIMIT 5',
];

describe('singleRow', () => {
  it('says yes to lookups by a key, aggregates without GROUP BY and constant rows', () => {
    for (const sql of ONE) expect(singleRow(program(sql)), sql).toBe(true);
  });

  it('says no to anything that may loop, call a subroutine or return two rows', () => {
    for (const sql of MANY) expect(singleRow(program(sql)), sql).toBe(false);
  });

  it('never says yes to a statement that returns two rows, for any of its parameters', () => {
    const values = [null, 0, 1, 2, 5, 10, 20, 21, 'v1', 'v3', -1, 1.5];
    for (const sql of [...ONE, ...MANY]) {
      if (!singleRow(program(sql))) continue;
      const stmt = db.prepare(sql);
      const slots = (sql.match(/\?/g) ?? []).length;
      for (const x of values) for (const y of values) expect(stmt.all(...[x, y].slice(0, slots)).length, sql).toBeLessThanOrEqual(1);
    }
  });

  it('says no to a program it cannot read: no Init first, or an unknown opcode', () => {
    const ops = program('SELECT v FROM kv WHERE id = ?');
    expect(singleRow(ops.slice(1))).toBe(false);
    expect(singleRow(ops.map((op) => (op.opcode === 'Column' ? { ...op, opcode: 'Next' } : op)))).toBe(false);
    expect(singleRow(ops.map((op) => (op.opcode === 'SeekRowid' ? { ...op, p2: 1 } : op)))).toBe(false);
    // A body that does not end in Halt would fall into the trailer and start again.
    expect(singleRow(ops.map((op) => (op.opcode === 'Halt' ? { ...op, opcode: 'Noop' } : op)))).toBe(false);
  });
});
