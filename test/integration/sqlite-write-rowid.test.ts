import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { write, type Param } from '../../src/sqlite/sqlite-ops.ts';

let dataDir: string;
let handles: HandleCache;
let n = 0;
let calls = 0;

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-rowid-'));
});
afterEach(() => handles?.closeAll());
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function target(): DbTarget {
  handles ??= new HandleCache({ size: 4 });
  const agent = `a${++n}`;
  return { id: `ws/${agent}`, path: databasePath(dataDir, 'ws', agent, 0), shard: 0, limits: PLAN_LIMITS.pro };
}

/** Runs writes one after another on one handle, as a worker does, answering each lastInsertRowid. */
function rowids(statements: [string, Param[]?][]): unknown[] {
  const t = target();
  const db = handles.open(t, 'write');
  return statements.map(([sql, params = []]) => write(db, sql, params, `call-${++calls}`, t.limits).lastInsertRowid);
}

describe('lastInsertRowid', () => {
  it('is the inserted row only when the statement inserted one, null otherwise', () => {
    expect(
      rowids([
        ['CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, n INTEGER DEFAULT 0)'],
        ['INSERT INTO leads (email) VALUES (?), (?)', ['a@x', 'b@x']],
        ['CREATE TABLE notes (body TEXT)'], // the connection still holds 2
        ['UPDATE leads SET n = n + 1'],
        ['DELETE FROM leads WHERE id = 1'],
        ['INSERT OR IGNORE INTO leads (email) VALUES (?)', ['b@x']], // ignored
        ['CREATE INDEX leads_n ON leads (n)'],
        ['ALTER TABLE leads ADD COLUMN note TEXT'],
      ]),
    ).toEqual([null, 2, null, null, null, null, null, null]);
  });

  it('reports an insert whose rowid equals the one before (first rows of two tables), and a REPLACE', () => {
    expect(
      rowids([
        ['CREATE TABLE a (x)'],
        ['CREATE TABLE b (x)'],
        ['INSERT INTO a VALUES (1)'],
        ['INSERT INTO b VALUES (1)'],
        ['REPLACE INTO b (rowid, x) VALUES (1, 2)'],
        ['INSERT INTO b VALUES (3) RETURNING x'],
      ]),
    ).toEqual([null, null, 1, 1, 1, 2]);
  });

  it('tells an upsert that inserted from one that only updated', () => {
    expect(
      rowids([
        ['CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)'],
        ["INSERT INTO kv VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET v = v + 1"],
        ["INSERT INTO kv VALUES ('b', 1) ON CONFLICT (k) DO UPDATE SET v = v + 1"],
        ["INSERT INTO kv VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET v = v + 1"], // updates only
        ["INSERT INTO kv VALUES ('a', 1) ON CONFLICT DO UPDATE SET v = v + 1 RETURNING v"],
        ["INSERT INTO kv VALUES ('do update', 1)"], // the words inside a string are no upsert
      ]),
    ).toEqual([null, 1, 2, null, null, 3]);
  });

  // Texts past what the write's shape cache keeps (2,048 characters) are looked at per write.
  it('tells them apart in statements too long to remember', () => {
    const long = `'${'x'.repeat(3000)}'`;
    expect(
      rowids([
        ['CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)'],
        [`INSERT INTO kv VALUES ('a', ${long}) ON CONFLICT (k) DO UPDATE SET v = excluded.v`],
        [`INSERT INTO kv VALUES ('a', ${long}) ON CONFLICT (k) DO UPDATE SET v = excluded.v`], // updates only
        [`INSERT INTO kv VALUES ('b', ${long})`],
        [`UPDATE kv SET v = ${long}`],
      ]),
    ).toEqual([null, 1, null, 2, null]);
  });
});
