import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { MAX_NAME_BYTES } from '../../src/guard/guard.ts';
import { readShape } from '../../src/sqlite/read-shape.ts';
import { query } from '../../src/sqlite/sqlite-query.ts';
import { checkedStatement, forgetStatements } from '../../src/sqlite/statement-cache.ts';

const open: Database.Database[] = [];

function database(): Database.Database {
  const db = new Database(':memory:');
  hardenConnection(db);
  db.exec('CREATE TABLE t (x INTEGER)');
  db.exec('INSERT INTO t VALUES (9007199254740993)');
  open.push(db);
  return db;
}

afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

describe('readShape', () => {
  it('sets a statement to read rows as results encode them, and works out its columns once', () => {
    const stmt = database().prepare(`SELECT x, x AS "${'n'.repeat(MAX_NAME_BYTES + 10)}" FROM t`);
    const shape = readShape(stmt);
    expect(shape.columns[0]).toBe('x');
    expect(shape.columns[1]).toMatch(/…\[\d+ bytes\]$/);
    expect(shape.columnBytes).toBe(Buffer.byteLength(JSON.stringify(shape.columns)));
    expect(Object.isFrozen(shape.columns)).toBe(true);
    // Rows as arrays, INTEGERs past 2^53 exact.
    expect(stmt.all()).toEqual([[9007199254740993n, 9007199254740993n]]);
    expect(readShape(stmt)).toBe(shape);
  });

  it('gives a query its statement’s columns from the second read on, and new ones once the schema moved', () => {
    const db = database();
    const first = query(db, 'SELECT * FROM t', [], 10, 1e6);
    const second = query(db, 'SELECT * FROM t', [], 10, 1e6);
    expect(second.columns).toBe(first.columns);
    expect(second.rows).toEqual([['9007199254740993']]);
    // What a write that moves the schema does (see `write`): the next read prepares again.
    db.exec('ALTER TABLE t ADD COLUMN y TEXT DEFAULT 1');
    forgetStatements(db);
    expect(query(db, 'SELECT * FROM t', [], 10, 1e6)).toEqual({ columns: ['x', 'y'], rows: [['9007199254740993', '1']], truncated: false });
  });

  it('reads a statement of one row at most whole, with what the row-by-row read answers', () => {
    const db = database();
    db.exec(`CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO kv VALUES (1, '${'x'.repeat(200)}'), (2, 'two')`);
    const one = 'SELECT v FROM kv WHERE id = ?';
    const scan = 'SELECT v FROM kv WHERE id + 0 = ?'; // the same rows, read by the iterator
    query(db, one, [1], 10, 1e6);
    query(db, scan, [1], 10, 1e6);
    expect(readShape(checkedStatement(db, one, 'read')).singleRow).toBe(true);
    expect(readShape(checkedStatement(db, scan, 'read')).singleRow).toBe(false);
    // Read whole: no iterator is asked for.
    const stmt = checkedStatement(db, one, 'read');
    Object.defineProperty(stmt, 'iterate', {
      configurable: true,
      value: () => {
        throw new Error('iterated');
      },
    });
    expect(query(db, one, [2], 10, 1e6).rows).toEqual([['two']]);
    Reflect.deleteProperty(stmt, 'iterate');
    for (const id of [1, 2, 3]) {
      for (const [maxRows, maxBytes] of [
        [10, 1e6],
        [1, 1e6],
        [0, 1e6],
        [10, 100],
      ] as const) {
        expect(query(db, one, [id], maxRows, maxBytes), `${id} ${maxRows} ${maxBytes}`).toEqual(query(db, scan, [id], maxRows, maxBytes));
      }
    }
    expect(query(db, one, [1], 10, 100)).toMatchObject({ rows: [], truncated: true, oversize: true });
    expect(query(db, one, [2], 0, 1e6)).toMatchObject({ rows: [], truncated: true });
  });
});
