import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { StatementCache, statementCache, statementCost } from '../../src/sqlite/statement-cache.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const open: Database.Database[] = [];

function database(): Database.Database {
  const db = new Database(':memory:');
  hardenConnection(db);
  db.exec('CREATE TABLE t (x)');
  open.push(db);
  return db;
}

afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

/** A distinct IN list of `n` values: the statement shape that filled a child's memory. */
const inList = (seed: number, n: number) => `SELECT x FROM t WHERE x IN (${Array.from({ length: n }, (_, k) => seed * 1_000_000 + k).join(',')})`;

describe('StatementCache', () => {
  it('keeps the estimated bytes of many large statements over several databases within its budget', () => {
    const budget = 4 * 1024 * 1024;
    const cache = new StatementCache(budget);
    const dbs = [database(), database(), database()];
    let kept = 0;
    for (let i = 0; i < 60; i++) {
      const stmt = cache.checked(dbs[i % 3]!, inList(i, 500), 'read');
      expect(stmt.all()).toEqual([]);
      const { bytes, count } = cache.stats();
      expect(bytes).toBeLessThanOrEqual(budget);
      kept = Math.max(kept, count);
    }
    // Large enough to be kept, too many to keep them all: eviction did the bounding.
    expect(kept).toBeGreaterThan(1);
    expect(cache.stats().count).toBeLessThan(60);
  });

  it('charges a statement at least its schema text, which an INSERT copies its defaults from (a red team filled a child through 4 MB of defaults)', () => {
    const db = database();
    db.exec(`CREATE TABLE wide (a, b DEFAULT '${'x'.repeat(300_000)}')`);
    const cache = new StatementCache(32 * 1024 * 1024);
    for (let i = 0; i < 20; i++) cache.checked(db, `INSERT INTO wide (a) SELECT ${i} WHERE 0`, 'write');
    // Each costs at least the 300 KB schema: at most ~100 fit, and every one is charged so.
    const { bytes, count } = cache.stats();
    expect(count).toBe(20);
    expect(bytes).toBeGreaterThanOrEqual(20 * 300_000);
    // Past a sixteenth of the budget (2 MB), a statement of that schema is not kept at all.
    db.exec(`ALTER TABLE wide ADD COLUMN c DEFAULT '${'y'.repeat(2_100_000)}'`);
    cache.forget(db);
    cache.checked(db, 'INSERT INTO wide (a) SELECT 1 WHERE 0', 'write');
    expect(cache.stats().count).toBe(0);
  });

  it('evicts the least recently used statement of any database, and a hit counts as a use', () => {
    const a = database();
    const b = database();
    const sql = (n: number) => `SELECT x FROM t WHERE x = ${n}`; // 10 to 99: all the same size
    const probe = new StatementCache(1 << 30);
    probe.checked(a, sql(10), 'read');
    const one = probe.stats().bytes;
    expect(one).toBeGreaterThanOrEqual(statementCost({ sqlBytes: 0, programLength: 0, columns: 0, nameBytes: 0 }));

    // Room for sixteen (the largest a statement may be is a sixteenth of the budget).
    const cache = new StatementCache(16 * one);
    const first = cache.checked(a, sql(10), 'read');
    for (let n = 11; n < 26; n++) cache.checked(n % 2 ? b : a, sql(n), 'read');
    expect(cache.stats().count).toBe(16);
    expect(cache.checked(a, sql(10), 'read')).toBe(first); // used again: now the newest
    const second = cache.checked(b, sql(11), 'read');
    expect(cache.checked(b, sql(11), 'read')).toBe(second); // a hit, and the newest now
    cache.checked(b, sql(26), 'read'); // pushes out a's `x = 12`, the least recently used
    expect(cache.stats()).toMatchObject({ count: 16, bytes: 16 * one });
    expect(cache.checked(a, sql(10), 'read')).toBe(first);
    expect(cache.checked(b, sql(11), 'read')).toBe(second);
    const twelve = cache.checked(a, sql(12), 'read'); // prepared again, pushing out `x = 13`
    expect(cache.checked(a, sql(12), 'read')).toBe(twelve);
    expect(cache.stats().count).toBe(16);
  });

  it('keeps least-recently-used order when a used statement was the newest before a miss', () => {
    // A repeat of the newest is not moved (it is last already): a statement prepared since, or
    // one forgotten and prepared again, is the newest then, and a use of the former one moves it.
    const a = database();
    const b = database();
    const sql = (n: number) => `SELECT x FROM t WHERE x = ${n}`; // 10 to 99: all the same size
    const probe = new StatementCache(1 << 30);
    probe.checked(a, sql(10), 'read');
    const cache = new StatementCache(16 * probe.stats().bytes);
    const ten = cache.checked(a, sql(10), 'read');
    for (let n = 11; n < 26; n++) cache.checked(a, sql(n), 'read');
    expect(cache.checked(a, sql(10), 'read')).toBe(ten); // the newest
    cache.checked(b, sql(26), 'read'); // prepared: the newest now (pushes out `x = 11`)
    cache.forget(b);
    cache.checked(b, sql(26), 'read'); // and again
    expect(cache.checked(a, sql(10), 'read')).toBe(ten); // used: after b's `x = 26`
    for (let n = 27; n < 41; n++) cache.checked(a, sql(n), 'read'); // push out 12 to 25
    cache.checked(a, sql(41), 'read'); // pushes out b's `x = 26`, the least recently used
    expect(cache.stats().count).toBe(16);
    expect(cache.checked(a, sql(10), 'read')).toBe(ten);
  });

  it('does not keep a statement estimated past a sixteenth of the budget', () => {
    const cache = new StatementCache(1024 * 1024);
    const db = database();
    const big = inList(1, 12_000);
    const stmt = cache.checked(db, big, 'read');
    expect(stmt.all()).toEqual([]);
    expect(cache.stats()).toMatchObject({ count: 0, bytes: 0 });
    expect(cache.checked(db, big, 'read')).not.toBe(stmt);
  });

  it('charges a statement for its result columns, not only its SQL: SELECT *,* over long names', () => {
    const db = database();
    const names = Array.from({ length: 50 }, (_, k) => `c${k}_${'n'.repeat(200)}`);
    db.exec(`CREATE TABLE wide (${names.join(', ')})`);
    const cache = new StatementCache(1 << 30);
    const sql = `SELECT ${Array(20).fill('*').join(',')} FROM wide`;
    cache.checked(db, sql, 'read');
    // 1,000 columns of 200-byte names: over half a megabyte of names from 45 bytes of SQL.
    expect(cache.stats().bytes).toBeGreaterThan(1000 * 200 + 1000 * 256);
  });

  it('forgets a database: its statements leave the count and the bytes', () => {
    const cache = new StatementCache(1 << 30);
    const a = database();
    const b = database();
    cache.checked(a, 'SELECT 1', 'read');
    cache.checked(a, 'SELECT 2', 'read');
    cache.checked(b, 'SELECT 3', 'read');
    const before = cache.stats();
    cache.forget(a);
    expect(cache.stats().count).toBe(1);
    expect(cache.stats().bytes).toBeLessThan(before.bytes);
    cache.forget(b);
    expect(cache.stats()).toMatchObject({ count: 0, bytes: 0 });
  });

  it('hands out without judging only a statement it admitted, for that mode and database, until forgotten', () => {
    const cache = new StatementCache(1 << 30);
    const a = database();
    const b = database();
    expect(cache.cached(a, 'SELECT x FROM t', 'read')).toBeUndefined();
    const stmt = cache.checked(a, 'SELECT x FROM t', 'read');
    expect(cache.cached(a, 'SELECT x FROM t', 'read')).toBe(stmt);
    expect(cache.cached(a, 'SELECT x FROM t', 'write')).toBeUndefined();
    expect(cache.cached(b, 'SELECT x FROM t', 'read')).toBeUndefined();
    // A refusal is never kept, so never handed out.
    expect(() => cache.checked(a, 'DELETE FROM t', 'read')).toThrow();
    expect(cache.cached(a, 'DELETE FROM t', 'read')).toBeUndefined();
    cache.forget(a);
    expect(cache.cached(a, 'SELECT x FROM t', 'read')).toBeUndefined();
  });

  it('keeps a miss judged under the key its caller built once where a lookup without the key finds it', () => {
    const cache = new StatementCache(1 << 30);
    const a = database();
    const key = cache.keyOf(a, 'SELECT x FROM t', 'read');
    expect(cache.cached(a, 'SELECT x FROM t', 'read', key)).toBeUndefined();
    const stmt = cache.checked(a, 'SELECT x FROM t', 'read', key);
    expect(cache.cached(a, 'SELECT x FROM t', 'read')).toBe(stmt);
    expect(cache.checked(a, 'SELECT x FROM t', 'read')).toBe(stmt);
    expect(cache.keyOf(a, 'SELECT x FROM t', 'write')).not.toBe(key);
    expect(cache.keyOf(database(), 'SELECT x FROM t', 'read')).not.toBe(key);
  });

  it('shrinks to a lowered budget at once', () => {
    const cache = new StatementCache(1 << 30);
    const db = database();
    for (let i = 0; i < 20; i++) cache.checked(db, `SELECT ${i}`, 'read');
    const one = cache.stats().bytes / 20;
    cache.setBudget(Math.floor(one * 5.5));
    expect(cache.stats().count).toBe(5);
    expect(cache.stats().bytes).toBeLessThanOrEqual(Math.floor(one * 5.5));
  });

  it("drops a database's statements from the child's cache when the handle cache closes it", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-stmt-cache-'));
    const handles = new HandleCache({ size: 1 });
    try {
      const target = (name: string) => ({ id: `w/${name}`, path: path.join(dir, `${name}.sqlite`), shard: 0 });
      const before = statementCache.stats().count;
      const a = handles.open(target('a'), 'write');
      statementCache.checked(a, 'SELECT 41', 'read');
      statementCache.checked(a, 'SELECT 42', 'read');
      expect(statementCache.stats().count).toBe(before + 2);
      handles.open(target('b'), 'write'); // size 1: closes a
      expect(statementCache.stats().count).toBe(before);
    } finally {
      handles.closeAll();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
