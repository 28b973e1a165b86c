import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { write, type Param } from '../../src/sqlite/sqlite-ops.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { dropEffect } from '../../src/sqlite/drop-effect.ts';
import { dropObject, dropTarget } from '../../src/sqlite/sqlite-drop.ts';

let dataDir: string;
let handles: HandleCache;
let n = 0;
let calls = 0;
const limits = { maxRows: 50, maxBytes: 64 * 1024 };

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-effect-'));
});
afterEach(() => handles?.closeAll());
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function open(...setup: string[]): { db: Database; t: DbTarget } {
  handles ??= new HandleCache({ size: 4 });
  const agent = `a${++n}`;
  const t: DbTarget = { id: `ws/${agent}`, path: databasePath(dataDir, 'ws', agent, 0), shard: 0, limits: PLAN_LIMITS.pro };
  const db = handles.open(t, 'write');
  for (const sql of setup) write(db, sql, [], `call-${++calls}`, t.limits);
  return { db, t };
}

const LEADS = ['CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, company TEXT)', "INSERT INTO leads VALUES (1, 'a@x', 'A'), (2, 'b@x', 'B')"];

function preview(db: Database, t: DbTarget, sql: string, params: Param[] = []) {
  return previewEffect(db, sql, params, t.limits, limits);
}

function contents(db: Database) {
  return db.prepare('SELECT * FROM leads ORDER BY id').all();
}

describe('the effect of a write', () => {
  it('counts and lists an INSERT, UPDATE and DELETE with before and after, and writes nothing', () => {
    const { db, t } = open(...LEADS);
    const rows = contents(db);
    const bytes = fs.readFileSync(t.path);
    const inserted = preview(db, t, 'INSERT INTO leads (email, company) VALUES (?, ?)', ['c@x', 'C']);
    expect(inserted.tables).toEqual([{ table: 'leads', inserted: 1, updated: 0, deleted: 0 }]);
    expect(inserted.rows).toEqual([
      { table: 'leads', op: 'insert', key: { rowid: 3 }, before: null, after: { id: 3, email: 'c@x', company: 'C' }, madeAtRun: ['rowid', 'id'] },
    ]);
    const updated = preview(db, t, 'UPDATE leads SET company = ? WHERE id = 1', ['Acme']);
    expect(updated.tables).toEqual([{ table: 'leads', inserted: 0, updated: 1, deleted: 0 }]);
    expect(updated.rows[0]).toMatchObject({ op: 'update', before: { company: 'A' }, after: { company: 'Acme' } });
    const deleted = preview(db, t, 'DELETE FROM leads WHERE email = ?', ['b@x']);
    expect(deleted.tables).toEqual([{ table: 'leads', inserted: 0, updated: 0, deleted: 1 }]);
    expect(deleted.rows[0]).toMatchObject({ op: 'delete', key: { rowid: 2 }, before: { id: 2, email: 'b@x', company: 'B' }, after: null });
    expect(deleted.cut).toBe(false);
    expect(deleted.digest).toMatch(/^[0-9a-f]{64}$/);
    // Nothing committed: same rows, same file, no temporary object left, the pragma as it was.
    expect(contents(db)).toEqual(rows);
    expect(fs.readFileSync(t.path).equals(bytes)).toBe(true);
    expect(db.prepare('SELECT count(*) FROM sqlite_temp_schema').pluck().get()).toBe(0);
    expect(db.pragma('recursive_triggers', { simple: true })).toBe(0);
    expect(db.inTransaction).toBe(false);
  });

  it('shows an upsert as an update and a REPLACE as a delete and an insert', () => {
    const { db, t } = open(...LEADS);
    const upsert = preview(db, t, 'INSERT INTO leads (email, company) VALUES (?, ?) ON CONFLICT (email) DO UPDATE SET company = excluded.company', [
      'a@x',
      'Z',
    ]);
    expect(upsert.tables).toEqual([{ table: 'leads', inserted: 0, updated: 1, deleted: 0 }]);
    expect(upsert.rows[0]).toMatchObject({ op: 'update', before: { company: 'A' }, after: { company: 'Z' } });
    const replace = preview(db, t, 'INSERT OR REPLACE INTO leads (id, email, company) VALUES (9, ?, ?)', ['a@x', 'Q']);
    expect(replace.tables).toEqual([{ table: 'leads', inserted: 1, updated: 0, deleted: 1 }]);
  });

  it('gives the same digest as the approved run when nothing changed, and refuses to commit another effect', () => {
    const { db, t } = open(...LEADS);
    const sql = 'UPDATE leads SET company = upper(company)';
    const approved = preview(db, t, sql);
    expect(preview(db, t, sql).digest).toBe(approved.digest);
    write(db, "INSERT INTO leads VALUES (3, 'c@x', 'c')", [], `call-${++calls}`, t.limits);
    const before = contents(db);
    let thrown: unknown;
    try {
      write(db, sql, [], `call-${++calls}`, t.limits, undefined, undefined, { digest: approved.digest, limits });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: 'APPROVAL_STALE', effect: { tables: [{ table: 'leads', updated: 3 }] } });
    expect(contents(db)).toEqual(before);
    const now = preview(db, t, sql);
    const ran = write(db, sql, [], `call-${++calls}`, t.limits, undefined, undefined, { digest: now.digest, limits });
    expect(ran.changes).toBe(3);
    expect(db.prepare('SELECT count(*) FROM sqlite_temp_schema').pluck().get()).toBe(0);
    expect(contents(db)).toEqual(before.map((r) => ({ ...(r as object), company: String((r as { company: string }).company).toUpperCase() })));
  });

  it('cuts rows past the limits and long values, and says so; the digest covers them all', () => {
    const { db, t } = open('CREATE TABLE notes (body TEXT)', "INSERT INTO notes SELECT printf('n%d', value) FROM json_each('[1,2,3,4,5,6,7,8,9,10]')");
    const few = previewEffect(db, 'UPDATE notes SET body = body || ?', ['x'.repeat(1000)], t.limits, { maxRows: 3, maxBytes: 64 * 1024 });
    expect(few.tables).toEqual([{ table: 'notes', inserted: 0, updated: 10, deleted: 0 }]);
    expect(few.rows).toHaveLength(3);
    expect(few.cut).toBe(true);
    expect(few.rows[0]!.after!.body).toMatchObject({ bytes: 1002 });
    const small = previewEffect(db, 'UPDATE notes SET body = body || ?', ['x'.repeat(1000)], t.limits, { maxRows: 50, maxBytes: 700 });
    expect(small.cut).toBe(true);
    expect(small.rows.length).toBeGreaterThan(0);
    expect(Buffer.byteLength(JSON.stringify(small.rows))).toBeLessThanOrEqual(700);
    expect(small.digest).toBe(few.digest);
    const all = previewEffect(db, 'UPDATE notes SET body = body || ?', ['x'.repeat(1000)], t.limits, { maxRows: 50, maxBytes: 64 * 1024 });
    expect(all.rows).toHaveLength(10);
    expect(all.digest).toBe(few.digest);
    // A value beyond the rows shown that changed before the run changes the digest.
    write(db, "UPDATE notes SET body = 'changed' WHERE body = 'n9'", [], `call-${++calls}`, t.limits);
    const other = previewEffect(db, 'UPDATE notes SET body = body || ?', ['x'.repeat(1000)], t.limits, { maxRows: 3, maxBytes: 64 * 1024 });
    expect(other.digest).not.toBe(few.digest);
  });

  it('binds an insert by its count, not by the rowid SQLite gives it or a value computed as it runs', () => {
    const { db, t } = open("CREATE TABLE log (id INTEGER PRIMARY KEY, at TEXT DEFAULT (strftime('%f', 'now')), body TEXT)");
    const sql = 'INSERT INTO log (body) VALUES (?)';
    const approved = preview(db, t, sql, ['x']);
    write(db, sql, ['another'], `call-${++calls}`, t.limits);
    const ran = write(db, sql, ['x'], `call-${++calls}`, t.limits, undefined, undefined, { digest: approved.digest, limits });
    expect(ran).toMatchObject({ changes: 1, lastInsertRowid: 2 });
    expect(preview(db, t, 'INSERT INTO log (body) VALUES (?), (?)', ['x', 'y']).digest).not.toBe(approved.digest);
  });

  /** The approved run of `sql` after its preview `approved`: its result, or the error it threw. */
  function runBound(db: Database, t: DbTarget, sql: string, approved: { digest: string }, params: Param[] = []) {
    try {
      return write(db, sql, params, `call-${++calls}`, t.limits, undefined, undefined, { digest: approved.digest, limits });
    } catch (err) {
      return err;
    }
  }

  /** Resolves once the clock has moved past the start of the next second (CURRENT_TIMESTAMP's unit). */
  const nextSecond = () => new Promise((resolve) => setTimeout(resolve, 1001 - (Date.now() % 1000)));

  it('binds the values an update writes: one read from another table that changed since supersedes', () => {
    const { db, t } = open(
      'CREATE TABLE src (id INTEGER PRIMARY KEY, v TEXT)',
      "INSERT INTO src VALUES (1, 'nice')",
      'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)',
      "INSERT INTO t VALUES (1, 'old')",
    );
    const sql = 'UPDATE t SET v = (SELECT v FROM src WHERE id = 1) WHERE id = 1';
    const approved = preview(db, t, sql);
    expect(approved.rows[0]).toMatchObject({ before: { v: 'old' }, after: { v: 'nice' } });
    write(db, "UPDATE src SET v = 'evil'", [], `call-${++calls}`, t.limits);
    expect(runBound(db, t, sql, approved)).toMatchObject({ code: 'APPROVAL_STALE', effect: { rows: [{ after: { v: 'evil' } }] } });
    expect(db.prepare('SELECT v FROM t').pluck().all()).toEqual(['old']);
    // The same for an insert's values, by column list or without one.
    write(db, 'CREATE TABLE log (id INTEGER PRIMARY KEY, body TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP)', [], `call-${++calls}`, t.limits);
    for (const insert of ['INSERT INTO log (body, at) SELECT v, v FROM src', 'INSERT INTO log SELECT id, v, v FROM src']) {
      const seen = preview(db, t, insert);
      write(db, "UPDATE src SET v = 'worse'", [], `call-${++calls}`, t.limits);
      expect(runBound(db, t, insert, seen)).toMatchObject({ code: 'APPROVAL_STALE' });
      write(db, "UPDATE src SET v = 'evil'", [], `call-${++calls}`, t.limits);
    }
    expect(db.prepare('SELECT count(*) FROM log').pluck().get()).toBe(0);
  });

  it('binds a value the clock chooses (CASE WHEN unixepoch() < T): the run past T supersedes', async () => {
    const { db, t } = open('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)', "INSERT INTO t VALUES (1, 'old')");
    const at = Date.now() + 200;
    const sql = `UPDATE t SET v = CASE WHEN unixepoch('subsec') * 1000 < ${at} THEN 'nice' ELSE 'evil' END WHERE id = 1`;
    const approved = preview(db, t, sql);
    expect(approved.rows[0]).toMatchObject({ after: { v: 'nice' } });
    await new Promise((resolve) => setTimeout(resolve, at - Date.now() + 1));
    expect(runBound(db, t, sql, approved)).toMatchObject({ code: 'APPROVAL_STALE', effect: { rows: [{ after: { v: 'evil' } }] } });
    expect(db.prepare('SELECT v FROM t').pluck().all()).toEqual(['old']);
  });

  it('does not bind what the clock or randomness makes: a created_at default, an updated_at set to now, a random token, an assigned rowid', async () => {
    const { db, t } = open(
      'CREATE TABLE log (id INTEGER PRIMARY KEY, body TEXT, token BLOB DEFAULT (randomblob(8)), created_at TEXT DEFAULT CURRENT_TIMESTAMP, updated_at TEXT)',
      "INSERT INTO log (body) VALUES ('first')",
    );
    const insert = 'INSERT INTO log (body) VALUES (?)';
    const update = "UPDATE log SET body = ?, updated_at = CURRENT_TIMESTAMP, token = lower(hex(randomblob(4))) WHERE body = 'first'";
    const stamp = "UPDATE log SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = 1";
    const approvedInsert = preview(db, t, insert, ['x']);
    const approvedUpdate = preview(db, t, update, ['changed']);
    const approvedStamp = preview(db, t, stamp);
    // Another insert moves the rowid the approved one gets, and the second turns.
    write(db, insert, ['another'], `call-${++calls}`, t.limits);
    await nextSecond();
    expect(runBound(db, t, insert, approvedInsert, ['x'])).toMatchObject({ changes: 1, lastInsertRowid: 3 });
    expect(runBound(db, t, update, approvedUpdate, ['changed'])).toMatchObject({ changes: 1 });
    // The before values are bound as ever: the update changed them, so the stamp's preview is stale.
    expect(runBound(db, t, stamp, approvedStamp)).toMatchObject({ code: 'APPROVAL_STALE' });
    const again = preview(db, t, stamp);
    await nextSecond();
    expect(runBound(db, t, stamp, again)).toMatchObject({ changes: 1 });
    // Naming the volatile column binds it: its value is the statement's, not the default's.
    const named = 'INSERT INTO log (body, created_at) VALUES (?, (SELECT max(body) FROM log))';
    const seen = preview(db, t, named, ['y']);
    write(db, "UPDATE log SET body = 'zzz' WHERE id = 2", [], `call-${++calls}`, t.limits);
    expect(runBound(db, t, named, seen, ['y'])).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('does not bind the rowid of a row inserted without a column list, unless the statement gives it', () => {
    const { db, t } = open('CREATE TABLE plain (i INTEGER)', 'CREATE TABLE keyed (id INTEGER PRIMARY KEY, v TEXT)');
    const cases: [string, Param[], boolean][] = [
      ['INSERT INTO plain VALUES (?)', [1], true],
      ['INSERT INTO keyed VALUES (NULL, ?)', ['a'], true],
      ['INSERT INTO keyed SELECT max(id) + 10, ? FROM keyed', ['b'], false],
    ];
    for (const [sql, params, commits] of cases) {
      const approved = preview(db, t, sql, params);
      // Another insert, approved first, takes the rowid this one was shown.
      write(db, sql, params, `call-${++calls}`, t.limits);
      expect(runBound(db, t, sql, approved, params), sql).toMatchObject(commits ? { changes: 1 } : { code: 'APPROVAL_STALE' });
    }
  });

  it('keys a WITHOUT ROWID table by its primary key, and lists the rows a foreign-key action changes', () => {
    const { db, t } = open(
      'CREATE TABLE tags (name TEXT, lang TEXT, n INTEGER, PRIMARY KEY (lang, name)) WITHOUT ROWID',
      "INSERT INTO tags VALUES ('a', 'en', 1)",
      'CREATE TABLE parent (id INTEGER PRIMARY KEY)',
      'CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent (id) ON DELETE CASCADE)',
      'INSERT INTO parent VALUES (1), (2)',
      'INSERT INTO child VALUES (10, 1), (11, 1), (12, 2)',
    );
    expect(preview(db, t, 'UPDATE tags SET n = 2').rows).toEqual([
      { table: 'tags', op: 'update', key: { lang: 'en', name: 'a' }, before: { name: 'a', lang: 'en', n: 1 }, after: { name: 'a', lang: 'en', n: 2 } },
    ]);
    const cascade = preview(db, t, 'DELETE FROM parent WHERE id = 1');
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(cascade.tables).toEqual([
      { table: 'child', inserted: 0, updated: 0, deleted: 2 },
      { table: 'parent', inserted: 0, updated: 0, deleted: 1 },
    ]);
  });

  it('gives the run the digest of its preview for random writes on unchanged data, and counts what the run changes', () => {
    const { db, t } = open('CREATE TABLE r (id INTEGER PRIMARY KEY, k TEXT UNIQUE, n INTEGER, b BLOB)');
    let seed = 29;
    const next = (m: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % m;
    };
    const statements: [string, () => Param[]][] = [
      ['INSERT INTO r (k, n) VALUES (?, ?)', () => [`k${next(40)}`, next(100)]],
      ['INSERT OR REPLACE INTO r (k, n) VALUES (?, ?)', () => [`k${next(40)}`, next(100)]],
      ['INSERT INTO r (k, n) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET n = n + excluded.n', () => [`k${next(40)}`, next(100)]],
      ['UPDATE r SET n = n * 2, b = randomblob(4) WHERE n < ?', () => [next(100)]],
      ['DELETE FROM r WHERE n % ? = 0', () => [2 + next(5)]],
    ];
    for (let i = 0; i < 60; i++) {
      const [sql, params] = statements[next(statements.length)]!;
      const p = params();
      let approved: ReturnType<typeof preview>;
      try {
        approved = preview(db, t, sql, p);
      } catch (err) {
        // A UNIQUE conflict fails the preview, and then the run: nothing changes.
        expect(String(err)).toMatch(/UNIQUE/);
        expect(() => write(db, sql, p, `call-${++calls}`, t.limits)).toThrow(/UNIQUE/);
        continue;
      }
      let ran: { changes: number };
      try {
        ran = write(db, sql, p, `call-${++calls}`, t.limits, undefined, undefined, { digest: approved.digest, limits });
      } catch (err) {
        throw new Error(`${sql} ${JSON.stringify(p)}: the run did not match its preview: ${String(err)}`);
      }
      const counted = approved.tables.reduce((n, x) => n + x.inserted + x.updated, 0);
      // changes() counts inserted and updated rows, and deleted ones only for a DELETE.
      if (sql.startsWith('DELETE')) expect(ran.changes).toBe(approved.tables.reduce((n, x) => n + x.deleted, 0));
      else expect(ran.changes).toBe(counted);
    }
  });

  it('describes a drop by its schema and row count', () => {
    const { db } = open(...LEADS);
    const effect = dropEffect(dropObject(db, dropTarget(db, 'leads')));
    expect(effect.tables).toEqual([{ table: 'leads', inserted: 0, updated: 0, deleted: 2 }]);
    expect(effect.dropped).toMatchObject({ type: 'table', name: 'leads', rows: 2, definition: expect.stringContaining('CREATE TABLE leads') });
  });
});
