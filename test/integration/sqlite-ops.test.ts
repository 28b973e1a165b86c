import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { AgentDbError } from '../../src/errors.ts';
import type { ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { describe as describeDb, drop, query, toOpError, write, type TableInfo } from '../../src/sqlite/sqlite-ops.ts';
import { schemaChangeRefusal, schemaState } from '../../src/sqlite/sqlite-schema.ts';
import { errorOf, expectFailed, storeFiles } from '../helpers/store-files.ts';

const { call, target, writeDb, run, send, handles } = storeFiles('agentdb-sqlite-ops-');

describe('a database that does not exist yet', () => {
  it('describes as empty, answers SELECT 1, reads a table as missing, and creates no file', () => {
    const t = target();
    expect(send({ op: 'describe', db: t })).toEqual({ ok: true, result: { tables: [] } });
    expect(send({ op: 'query', db: t, sql: 'SELECT 1 AS one', params: [], maxRows: 10 })).toEqual({
      ok: true,
      result: { columns: ['one'], rows: [[1]], truncated: false },
    });
    const detail = expectFailed(send({ op: 'query', db: t, sql: 'SELECT * FROM leads', params: [], maxRows: 10 }), 'SQL_ERROR');
    expect(detail).toMatch(/no such table: leads/);
    expectFailed(send({ op: 'drop', db: t, table: 'leads', callKey: call() }), 'NOT_FOUND');
    expect(fs.existsSync(path.dirname(t.path))).toBe(false);
  });

  it('is created by its first write, in WAL mode', () => {
    const t = target();
    const outcome = send({ op: 'write', db: t, sql: 'CREATE TABLE leads (id INTEGER PRIMARY KEY)', params: [], callKey: call() });
    expect(outcome.ok).toBe(true);
    expect(fs.existsSync(t.path)).toBe(true);
    expect(writeDb(t).pragma('journal_mode', { simple: true })).toBe('wal');
  });
});

describe('describe', () => {
  it('lists tables and views with columns, keys, indexes and row counts, hiding internal objects', () => {
    const t = target();
    run(t, 'CREATE TABLE companies (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE)');
    run(t, "CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT NOT NULL, stage TEXT DEFAULT 'new', company_id INTEGER REFERENCES companies(id))");
    run(t, 'CREATE INDEX leads_stage ON leads (stage, email)');
    run(t, "CREATE VIEW new_leads AS SELECT email FROM leads WHERE stage = 'new'");
    run(t, 'INSERT INTO companies (name) VALUES (?), (?)', ['northwind', 'globex']);
    run(t, 'INSERT INTO leads (email, company_id) VALUES (?, 1)', ['ada@northwind.io']);

    // Nothing here is cut to fit the result size, so every table is described in full.
    const tables = describeDb(writeDb(t)).tables as TableInfo[];
    // sqlite_sequence (from AUTOINCREMENT) and _agentdb_calls exist but are not shown.
    expect(tables.map((x) => x.name)).toEqual(['companies', 'leads', 'new_leads']);
    const leads = tables.find((x) => x.name === 'leads')!;
    expect(leads).toMatchObject({ type: 'table', rowCount: 1 });
    expect(leads.columns).toEqual([
      { name: 'id', type: 'INTEGER', notNull: false, default: null, primaryKey: true },
      { name: 'email', type: 'TEXT', notNull: true, default: null, primaryKey: false },
      { name: 'stage', type: 'TEXT', notNull: false, default: "'new'", primaryKey: false },
      { name: 'company_id', type: 'INTEGER', notNull: false, default: null, primaryKey: false },
    ]);
    expect(leads.foreignKeys).toEqual([{ from: 'company_id', table: 'companies', to: 'id' }]);
    expect(leads.indexes).toEqual([{ name: 'leads_stage', unique: false, columns: ['stage', 'email'] }]);
    const companies = tables.find((x) => x.name === 'companies')!;
    expect(companies.rowCount).toBe(2);
    // SQLite's own index behind UNIQUE is shown as the constraint, not by a name the guard refuses.
    expect(companies.indexes).toEqual([{ unique: true, columns: ['name'], constraint: 'unique' }]);
    const view = tables.find((x) => x.name === 'new_leads')!;
    expect(view).toEqual({ name: 'new_leads', type: 'view', columns: [expect.objectContaining({ name: 'email' })], foreignKeys: [], indexes: [] });
  });
});

describe('query', () => {
  it('stops at max_rows and says more existed', () => {
    const t = target();
    run(t, 'CREATE TABLE n (x INTEGER)');
    run(t, 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 50) INSERT INTO n SELECT x FROM c');
    const db = writeDb(t);
    expect(query(db, 'SELECT x FROM n ORDER BY x', [], 10, 1e6)).toEqual({
      columns: ['x'],
      rows: [[1], [2], [3], [4], [5], [6], [7], [8], [9], [10]],
      truncated: true,
    });
    expect(query(db, 'SELECT x FROM n WHERE x > ? ORDER BY x', [40], 10, 1e6)).toMatchObject({ truncated: false });
    expect(query(db, 'SELECT x FROM n WHERE x > ? ORDER BY x', [40], 10, 1e6).rows).toHaveLength(10);
    expect(db.inTransaction).toBe(false);
  });

  it('reads a statement judged before on its own, each time at the latest commit, cut as any read, leaving no transaction', () => {
    const t = target();
    run(t, 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)');
    run(t, "INSERT INTO kv VALUES (1, 'a'), (2, 'b')");
    const db = writeDb(t);
    // The first read is judged in a rolled-back transaction; later ones are hits, read without one.
    expect(query(db, 'SELECT v FROM kv WHERE id = ?', [1], 10, 1e6).rows).toEqual([['a']]);
    const other = new Database(t.path);
    try {
      other.prepare("UPDATE kv SET v = 'c' WHERE id = 1").run();
      expect(query(db, 'SELECT v FROM kv WHERE id = ?', [1], 10, 1e6)).toEqual({ columns: ['v'], rows: [['c']], truncated: false });
      expect(db.inTransaction).toBe(false);
      // Written from outside while this handle has read: still a plain read, answered in full.
      other.prepare("INSERT INTO kv VALUES (3, 'd')").run();
      expect(query(db, 'SELECT v FROM kv WHERE id = ?', [3], 10, 1e6).rows).toEqual([['d']]);
      expect(query(db, 'SELECT v FROM kv WHERE id = ?', [4], 10, 1e6).rows).toEqual([]);
      // Rows past max_rows are cut on a hit as on the first read, and the read leaves no lock behind.
      expect(query(db, 'SELECT v FROM kv ORDER BY id', [], 2, 1e6)).toEqual({ columns: ['v'], rows: [['c'], ['b']], truncated: true });
      expect(query(db, 'SELECT v FROM kv ORDER BY id', [], 2, 1e6)).toEqual({ columns: ['v'], rows: [['c'], ['b']], truncated: true });
      other.prepare('DELETE FROM kv WHERE id = 2').run();
      expect(query(db, 'SELECT v FROM kv ORDER BY id', [], 2, 1e6)).toEqual({ columns: ['v'], rows: [['c'], ['d']], truncated: false });
      expect(db.inTransaction).toBe(false);
    } finally {
      other.close();
    }
  });

  it('returns exact integers as numbers, larger ones as strings, and blobs as base64', () => {
    const t = target();
    const db = writeDb(t);
    const result = query(
      db,
      "SELECT 42 AS small, 9007199254740993 AS big, -9223372036854775808 AS min, 1.5 AS real, x'00ff10' AS blob, 'é' AS text, NULL AS none",
      [],
      10,
      1e6,
    );
    expect(result.rows).toEqual([[42, '9007199254740993', '-9223372036854775808', 1.5, { $blob: 'AP8Q' }, 'é', null]]);
  });

  it('binds integers as INTEGER, booleans as 1 and 0', () => {
    const db = writeDb(target());
    expect(query(db, 'SELECT typeof(?), typeof(?), ?, ?, typeof(?), ?', [1, 1.5, true, false, null, 'x'], 10, 1e6).rows).toEqual([
      ['integer', 'real', 1, 0, 'null', 'x'],
    ]);
  });

  it('keeps the rows that fit in the result size and marks the cut', () => {
    const db = writeDb(target());
    const sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100) SELECT x, printf('%.*c', 1000, 'a') FROM c";
    const result = query(db, sql, [], 100, 10_000);
    expect(result.truncated).toBe(true);
    expect(result.oversize).toBe(true);
    expect(result.rows.length).toBeGreaterThan(0);
    expect(result.rows.length).toBeLessThan(10);
    expect(Buffer.byteLength(JSON.stringify(result.rows))).toBeLessThanOrEqual(10_000);
    // A single blob far past the limit is cut without being encoded.
    expect(query(db, 'SELECT randomblob(50000000)', [], 10, 10_000)).toEqual({ columns: ['randomblob(50000000)'], rows: [], truncated: true, oversize: true });
  });

  it.each([
    ['mixed', ['"', '\\', '\u0001', '\n', '日', '🙂', 'é', 'a']],
    ['control characters only', ['\u0001', '\u001f']],
  ])('cuts at exactly the row that does not fit, whatever its text needs escaping to (%s)', (_, texts) => {
    const t = target();
    run(t, 'CREATE TABLE r (id INTEGER PRIMARY KEY, s TEXT)');
    // JSON makes these longer than their length: escapes (2 or 6 bytes a character), UTF-8.
    for (let k = 0; k < 32; k++) run(t, 'INSERT INTO r (s) VALUES (?)', [texts[k % texts.length]!.repeat(1 + (k % 7) * 3)]);
    const db = writeDb(t);
    const sql = 'SELECT s FROM r ORDER BY id';
    const all = query(db, sql, [], 1000, 1e9).rows;
    expect(all).toHaveLength(32);
    // The rows kept are the longest run whose JSON, counted as [row,row,...] plus a comma each, fits.
    const fitting = (limit: number) => {
      let bytes = 2;
      let kept = 0;
      for (const row of all) {
        bytes += Buffer.byteLength(JSON.stringify(row)) + 1;
        if (bytes > limit) break;
        kept++;
      }
      return kept;
    };
    const total = 2 + all.reduce((n, row) => n + Buffer.byteLength(JSON.stringify(row)) + 1, 0);
    // The limit holds the column names too: ["s"].
    const columns = Buffer.byteLength(JSON.stringify(['s']));
    for (let limit = 2; limit <= total; limit++) {
      const result = query(db, sql, [], 1000, limit + columns);
      expect(result.rows.length, `limit ${limit}`).toBe(fitting(limit));
      expect(result.truncated).toBe(limit < total);
    }
    expect(query(db, sql, [], 1000, total + columns).rows).toEqual(all);
  });

  it('refuses writes, internal tables and engine tables', () => {
    const t = target();
    run(t, 'CREATE TABLE t (x)');
    const db = writeDb(t);
    expect(errorOf(() => query(db, 'INSERT INTO t VALUES (1)', [], 10, 1e6)).code).toBe('SQL_REFUSED');
    expect(errorOf(() => query(db, 'SELECT * FROM _agentdb_calls', [], 10, 1e6)).code).toBe('SQL_REFUSED');
    expect(errorOf(() => query(db, 'SELECT * FROM sqlite_master', [], 10, 1e6)).code).toBe('SQL_REFUSED');
    expect(errorOf(() => query(db, 'SELECT 1; SELECT 2', [], 10, 1e6)).code).toBe('SQL_MULTIPLE_STATEMENTS');
    expect(errorOf(() => query(db, 'SELEC 1', [], 10, 1e6)).code).toBe('SQL_SYNTAX');
    expect(errorOf(() => query(db, 'SELECT ?', [], 10, 1e6))).toEqual({ code: 'SQL_ERROR', detail: expect.stringMatching(/parameter/) });
    expect(db.inTransaction).toBe(false);
  });
});

describe('write', () => {
  it('returns changes, the last rowid and RETURNING rows', () => {
    const t = target();
    expect(run(t, 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, blob BLOB)')).toMatchObject({ changes: 0, rows: [], columns: [] });
    expect(run(t, 'INSERT INTO leads (email) VALUES (?), (?)', ['a@x', 'b@x'])).toEqual({
      changes: 2,
      lastInsertRowid: 2,
      columns: [],
      rows: [],
      truncated: false,
    });
    expect(run(t, "INSERT INTO leads (id, email, blob) VALUES (9007199254740993, 'c@x', x'01') RETURNING id, email, blob")).toEqual({
      changes: 1,
      lastInsertRowid: '9007199254740993',
      columns: ['id', 'email', 'blob'],
      rows: [['9007199254740993', 'c@x', { $blob: 'AQ==' }]],
      truncated: false,
    });
    expect(run(t, 'UPDATE leads SET email = upper(email) WHERE id < 3 RETURNING email')).toMatchObject({ changes: 2, rows: [['A@X'], ['B@X']] });
  });

  it('returns at most 1000 RETURNING rows but makes every change', () => {
    const t = target();
    run(t, 'CREATE TABLE n (x INTEGER)');
    const result = run(t, 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1500) INSERT INTO n SELECT x FROM c RETURNING x');
    expect(result.changes).toBe(1500);
    expect(result.rows).toHaveLength(1000);
    expect(result.truncated).toBe(true);
    expect(query(writeDb(t), 'SELECT count(*) FROM n', [], 1, 1e6).rows).toEqual([[1500]]);
  });

  it('runs a call id once: a retry returns the recorded result and writes nothing', () => {
    const t = target();
    run(t, 'CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT)');
    const db = writeDb(t);
    const id = call();
    const first = write(db, 'INSERT INTO events (what) VALUES (?) RETURNING id', ['signed up'], id, t.limits);
    expect(first).toEqual({ changes: 1, lastInsertRowid: 1, columns: ['id'], rows: [[1]], truncated: false });
    const again = write(db, 'INSERT INTO events (what) VALUES (?) RETURNING id', ['signed up'], id, t.limits);
    expect(again).toEqual({ ...first, replayed: true });
    expect(query(db, 'SELECT count(*) FROM events', [], 1, 1e6).rows).toEqual([[1]]);
    // The record survives closing the handle (it is in the file, committed with the row).
    handles().closeAll();
    const outcome = send({
      op: 'write',
      db: t,
      sql: 'INSERT INTO events (what) VALUES (?) RETURNING id',
      params: ['signed up'],
      callKey: id,
    });
    expect(outcome).toEqual({ ok: true, result: first, replayed: true });
    // The same key with another statement is another call: refused, and nothing is written.
    const other = send({ op: 'write', db: t, sql: 'INSERT INTO events (what) VALUES (?)', params: ['x'], callKey: id });
    expect(other).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(query(writeDb(t), 'SELECT count(*) FROM events', [], 1, 1e6).rows).toEqual([[1]]);
  });

  it('records a write without RETURNING rows as its changes and rowid alone, and answers it again as it was answered', () => {
    const t = target();
    run(t, 'CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT)');
    const db = writeDb(t);
    const id = call();
    const sql = 'INSERT INTO events (what) VALUES (?)';
    const first = write(db, sql, ['signed up'], id, t.limits);
    expect(first).toEqual({ changes: 1, lastInsertRowid: 1, columns: [], rows: [], truncated: false });
    // A fifth of each record was the empty columns and rows (issue 31: the calls table's frames).
    const record = db.prepare('SELECT result FROM _agentdb_calls WHERE call_id = ?').pluck().get(id);
    expect(record).toBe('{"changes":1,"lastInsertRowid":1}');
    const again = write(db, sql, ['signed up'], id, t.limits);
    expect(JSON.stringify(again)).toBe(JSON.stringify({ ...first, replayed: true }));
    // As the worker reads it for a write whose child died after the commit.
    const found = send({ op: 'recorded', db: t, callKey: id, effect: ['write', sql, ['signed up']] });
    expect(found).toEqual({ ok: true, result: { committed: true, result: first } });
    // A record written whole (before this) replays as it is.
    const old = call();
    db.prepare('INSERT INTO _agentdb_calls (call_id, result, at, digest) VALUES (?, ?, ?, NULL)').run(
      old,
      JSON.stringify({ ...first, lastInsertRowid: 7 }),
      Date.now(),
    );
    expect(write(db, sql, ['x'], old, t.limits)).toEqual({ ...first, lastInsertRowid: 7, replayed: true });
    expect(query(db, 'SELECT count(*) FROM events', [], 1, 1e6).rows).toEqual([[1]]);
  });

  it('records nothing for a failed write, so its retry runs', () => {
    const t = target();
    run(t, 'CREATE TABLE u (email TEXT UNIQUE)');
    run(t, "INSERT INTO u VALUES ('a')");
    const db = writeDb(t);
    const id = call();
    expect(errorOf(() => write(db, 'INSERT INTO u VALUES (?)', ['a'], id, t.limits))).toEqual({
      code: 'SQL_ERROR',
      detail: 'UNIQUE constraint failed: u.email',
    });
    expect(db.inTransaction).toBe(false);
    run(t, "DELETE FROM u WHERE email = 'a'");
    expect(write(db, 'INSERT INTO u VALUES (?)', ['a'], id, t.limits)).toMatchObject({ changes: 1 });
  });

  it('refuses the internal table, triggers, drops and more than one statement', () => {
    const t = target();
    run(t, 'CREATE TABLE t (x)');
    const db = writeDb(t);
    for (const sql of [
      "INSERT INTO _agentdb_calls VALUES ('x', '{}', 0)",
      'DELETE FROM _agentdb_calls',
      'CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; END',
      'DROP TABLE t',
      'CREATE VIRTUAL TABLE f USING fts5(x)',
      'CREATE TEMP TABLE tt (x)',
    ]) {
      expect(errorOf(() => write(db, sql, [], call(), t.limits)).code, sql).toBe('SQL_REFUSED');
    }
    expect(errorOf(() => write(db, 'INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)', [], call(), t.limits)).code).toBe('SQL_MULTIPLE_STATEMENTS');
    expect(query(db, 'SELECT count(*) FROM t', [], 1, 1e6).rows).toEqual([[0]]);
    expect(describeDb(db).tables.map((x) => x.name)).toEqual(['t']);
  });

  it('allows a rename, which changes names but removes nothing', () => {
    const t = target();
    run(t, 'CREATE TABLE old_name (x UNIQUE)');
    expect(run(t, 'ALTER TABLE old_name RENAME TO new_name')).toMatchObject({ changes: 0 });
    expect(describeDb(writeDb(t)).tables.map((x) => x.name)).toEqual(['new_name']);
  });

  it('prepares cached statements again after the schema changed', () => {
    const t = target();
    run(t, 'CREATE TABLE t (x)');
    run(t, 'INSERT INTO t VALUES (1)');
    const db = writeDb(t);
    expect(query(db, 'SELECT * FROM t', [], 10, 1e6)).toEqual({ columns: ['x'], rows: [[1]], truncated: false });
    run(t, "ALTER TABLE t ADD COLUMN y TEXT DEFAULT 'new'");
    expect(query(db, 'SELECT * FROM t', [], 10, 1e6)).toEqual({ columns: ['x', 'y'], rows: [[1, 'new']], truncated: false });
  });
});

describe('the schema check behind the guard', () => {
  it('refuses what removed an object or created a trigger, judged on the schema itself', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE t (x); CREATE TABLE u (y); CREATE INDEX tx ON t (x)');
    const start = schemaState(db);
    db.exec('CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END');
    expect(schemaChangeRefusal(start, schemaState(db))).toMatch(/trigger/);
    db.exec('DROP TRIGGER tr; DROP INDEX tx');
    expect(schemaChangeRefusal(start, schemaState(db))).toMatch(/removed index:tx/);
    db.exec('CREATE INDEX tx ON t (x); CREATE TEMP TABLE scratch (z)');
    expect(schemaChangeRefusal(start, schemaState(db))).toMatch(/temporary/);
    db.exec('DROP TABLE temp.scratch; ALTER TABLE u RENAME TO v; CREATE TABLE w (z)');
    expect(schemaChangeRefusal(start, schemaState(db))).toBeUndefined();
    db.close();
  });
});

describe('drop', () => {
  it('drops a table or view by name, once per call id', () => {
    const t = target();
    run(t, 'CREATE TABLE "odd ""name""" (x)');
    run(t, 'CREATE TABLE Leads (x)');
    run(t, 'CREATE VIEW v AS SELECT 1');
    const db = writeDb(t);
    expect(drop(db, 'odd "name"', call())).toEqual({ dropped: 'odd "name"', type: 'table' });
    expect(drop(db, 'v', call())).toEqual({ dropped: 'v', type: 'view' });
    expect(errorOf(() => drop(db, 'leeds', call()))).toEqual({ code: 'NOT_FOUND', detail: 'there is no table or view named "leeds"' });
    const id = call();
    expect(drop(db, 'Leads', id)).toEqual({ dropped: 'Leads', type: 'table' });
    expect(drop(db, 'Leads', id)).toEqual({ dropped: 'Leads', type: 'table', replayed: true });
    expect(describeDb(db).tables).toEqual([]);
  });

  it('refuses the engine and internal tables and indexes', () => {
    const t = target();
    run(t, 'CREATE TABLE t (x UNIQUE)');
    run(t, 'CREATE INDEX tx ON t (x)');
    const db = writeDb(t);
    expect(errorOf(() => drop(db, 'sqlite_master', call())).code).toBe('SQL_REFUSED');
    expect(errorOf(() => drop(db, '_agentdb_calls', call())).code).toBe('SQL_REFUSED');
    expect(errorOf(() => drop(db, '_AGENTDB_CALLS', call())).code).toBe('SQL_REFUSED');
    expect(errorOf(() => drop(db, 'tx', call())).code).toBe('NOT_FOUND');
    expect(describeDb(db).tables.map((x) => x.name)).toEqual(['t']);
  });

  it('rolls back a drop that a foreign key forbids', () => {
    const t = target();
    run(t, 'CREATE TABLE parent (id INTEGER PRIMARY KEY)');
    run(t, 'CREATE TABLE child (parent_id INTEGER REFERENCES parent(id))');
    run(t, 'INSERT INTO parent VALUES (1)');
    run(t, 'INSERT INTO child VALUES (1)');
    const db = writeDb(t);
    // DROP_REFERENCED with the way out (session 32, R6), where SQLite's bare 'FOREIGN KEY constraint failed' was SQL_ERROR.
    expect(errorOf(() => drop(db, 'parent', call()))).toMatchObject({
      code: 'DROP_REFERENCED',
      detail: expect.stringMatching(/^rows of "child" refer to "parent"/),
    });
    expect(describeDb(db).tables.map((x) => x.name)).toEqual(['child', 'parent']);
    expect(db.inTransaction).toBe(false);
  });
});

describe('a file that is not SQLite', () => {
  it('answers DATABASE_CORRUPT for every operation and leaves the bytes alone', () => {
    const t = target();
    fs.mkdirSync(path.dirname(t.path), { recursive: true });
    const bytes = Buffer.from('this is a text file that someone put where a database should be\n'.repeat(100));
    fs.writeFileSync(t.path, bytes);
    const requests: ExecRequest[] = [
      { op: 'describe', db: t },
      { op: 'query', db: t, sql: 'SELECT 1', params: [], maxRows: 1 },
      { op: 'write', db: t, sql: 'CREATE TABLE x (y)', params: [], callKey: call() },
      { op: 'drop', db: t, table: 'x', callKey: call() },
    ];
    for (const req of requests) {
      expectFailed(send(req), 'DATABASE_CORRUPT');
    }
    expect(fs.readFileSync(t.path).equals(bytes)).toBe(true);
    expect(fs.readdirSync(path.dirname(t.path)).filter((f) => f.startsWith(path.basename(t.path)))).toEqual([path.basename(t.path)]);
    expect(handles().size).toBe(0);
  });
});

describe('the executor dispatch', () => {
  it('checks a statement through both guard layers without running it', () => {
    const t = target();
    run(t, 'CREATE TABLE t (x)');
    expect(send({ op: 'check', db: t, sql: 'INSERT INTO t VALUES (1)', mode: 'write' })).toEqual({ ok: true, result: { admitted: true } });
    expectFailed(send({ op: 'check', db: t, sql: 'INSERT INTO t VALUES (1)', mode: 'read' }), 'SQL_REFUSED');
    expectFailed(send({ op: 'check', db: t, sql: 'DROP TABLE t', mode: 'write' }), 'SQL_REFUSED');
    expect(query(writeDb(t), 'SELECT count(*) FROM t', [], 1, 1e6).rows).toEqual([[0]]);
  });

  it('refuses a path outside the data folder and evicts handles by shard', () => {
    const t = target();
    expectFailed(send({ op: 'describe', db: { ...t, path: path.join(os.tmpdir(), 'elsewhere.sqlite') } }), 'INTERNAL');
    run(t, 'CREATE TABLE t (x)');
    const other = { ...target(), shard: 1 };
    run(other, 'CREATE TABLE t (x)');
    expect(handles().size).toBe(2);
    expect(send({ op: 'evict', shards: [0] })).toEqual({ ok: true, result: { closed: 1 } });
    expect(handles().size).toBe(1);
  });
});

describe('error mapping', () => {
  it('maps SQLite codes to registry codes with SQLite message as the detail', () => {
    const sqlite = (code: string) => toOpError(Object.assign(new Error(`msg for ${code}`), { code }));
    expect(sqlite('SQLITE_CONSTRAINT_UNIQUE')).toEqual({ code: 'SQL_ERROR', detail: 'msg for SQLITE_CONSTRAINT_UNIQUE' });
    expect(sqlite('SQLITE_ERROR').code).toBe('SQL_ERROR');
    // Without a database to tell by, a full disk (a read's temporary files): never the plan's limit.
    expect(sqlite('SQLITE_FULL').code).toBe('STORAGE_FULL');
    expect(toOpError(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })).code).toBe('STORAGE_FULL');
    expect(sqlite('SQLITE_NOTADB').code).toBe('DATABASE_CORRUPT');
    expect(sqlite('SQLITE_CORRUPT_INDEX').code).toBe('DATABASE_CORRUPT');
    expect(sqlite('SQLITE_NOMEM').code).toBe('RESOURCE_LIMIT');
    expect(sqlite('SQLITE_TOOBIG').code).toBe('RESOURCE_LIMIT');
    expect(sqlite('SQLITE_BUSY_SNAPSHOT').code).toBe('UNAVAILABLE');
    expect(sqlite('SQLITE_IOERR_WRITE').code).toBe('INTERNAL');
    expect(toOpError(new AgentDbError('NOT_FOUND', 'x'))).toEqual({ code: 'NOT_FOUND', detail: 'x' });
    expect(toOpError(new Error('bug'))).toEqual({ code: 'INTERNAL', detail: 'bug' });
  });
});

describe('agent SQL the red team found mishandled', () => {
  it('binds ?NNN and named parameters from positional params, in queries and writes', () => {
    const db = writeDb(target());
    write(db, 'CREATE TABLE p (a, b)', [], 'c1', PLAN_LIMITS.pro);
    expect(write(db, 'INSERT INTO p VALUES (?1, ?1)', ['x'], 'c2', PLAN_LIMITS.pro).changes).toBe(1);
    expect(write(db, 'INSERT INTO p VALUES (:a, :b)', ['y', 'z'], 'c3', PLAN_LIMITS.pro).changes).toBe(1);
    expect(query(db, 'SELECT a, b FROM p WHERE a = ?1 OR b = ?1 ORDER BY a', ['x'], 10, 1 << 20).rows).toEqual([['x', 'x']]);
    expect(query(db, 'SELECT b FROM p WHERE a = :who', ['y'], 10, 1 << 20).rows).toEqual([['z']]);
  });

  it('runs an ALTER … ADD COLUMN with a CHECK as DDL, not as a query', () => {
    const db = writeDb(target());
    write(db, 'CREATE TABLE t (x)', [], 'c1', PLAN_LIMITS.pro);
    const r = write(db, 'ALTER TABLE t ADD COLUMN y INTEGER CHECK (y > 0)', [], 'c2', PLAN_LIMITS.pro);
    expect(r).toMatchObject({ changes: 0, columns: [], rows: [] });
  });

  it('drops a table named in another case, by the name it was created with', () => {
    const db = writeDb(target());
    write(db, 'CREATE TABLE Leads (x)', [], 'c1', PLAN_LIMITS.pro);
    expect(drop(db, 'LEADS', 'c2')).toEqual({ dropped: 'Leads', type: 'table' });
  });

  it("leaves last_insert_rowid() to the agent's own last insert across calls", () => {
    const db = writeDb(target());
    write(db, 'CREATE TABLE parent (id INTEGER PRIMARY KEY, n)', [], 'c1', PLAN_LIMITS.pro);
    write(db, 'CREATE TABLE child (parent_id, n)', [], 'c2', PLAN_LIMITS.pro);
    write(db, "INSERT INTO parent (id, n) VALUES (41, 'a')", [], 'c3', PLAN_LIMITS.pro);
    write(db, "INSERT INTO child VALUES (last_insert_rowid(), 'b')", [], 'c4', PLAN_LIMITS.pro);
    expect(query(db, 'SELECT parent_id FROM child', [], 10, 1 << 20).rows).toEqual([[41]]);
  });
});
