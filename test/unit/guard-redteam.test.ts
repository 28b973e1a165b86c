/**
 * The guard attacked end to end, as a hostile or confused agent would: every statement goes
 * through the store's own `query`, `write` and `drop` against a real database file that holds
 * agent tables and a populated `_agentdb_calls`, and the only question asked is whether
 * anything forbidden happened — a change by a query, a read of a forbidden table, a schema
 * object of a forbidden kind, a vanished object, a throw where an answer was due, or a
 * legitimate statement refused.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { engineCheck, hardenConnection, prepareChecked } from '../../src/guard/engine-check.ts';
import { guardQuery, guardTableName, guardWrite } from '../../src/guard/guard.ts';
import { tokenize } from '../../src/guard/tokenizer.ts';
import { ensureCallsTable } from '../../src/store/sqlite-calls.ts';
import { drop, query, write } from '../../src/store/sqlite-ops.ts';
import type { Param } from '../../src/store/sqlite-values.ts';

const SECRET = 'S3CR3T';
const LIMITS = { maxTables: 50, maxBytes: 100 * 1024 * 1024 };

/** What an agent could have made, plus agentdb's call record holding the secret. */
const SCHEMA = `
  CREATE TABLE t (a INTEGER PRIMARY KEY AUTOINCREMENT, b TEXT);
  CREATE TABLE u (x, y UNIQUE, note TEXT);
  CREATE INDEX u_x ON u(x);
  CREATE VIEW tv AS SELECT a, b FROM t;
  CREATE TABLE p (id INTEGER PRIMARY KEY);
  CREATE TABLE c (pid REFERENCES p(id) ON DELETE CASCADE);
  INSERT INTO t (b) VALUES ('one'), ('two');
  INSERT INTO u VALUES (1, 'a', NULL), (2, 'b', 'n');
  INSERT INTO p VALUES (1), (2);
  INSERT INTO c VALUES (1), (2);
  INSERT INTO _agentdb_calls VALUES ('planted', '${SECRET}-row', 0);
`;

interface Fixture {
  dir: string;
  file: string;
  db: Database.Database;
}

/** A database file opened the way the handle cache opens one, with the schema above. */
function fixture(extra = ''): Fixture {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-redteam-'));
  const file = path.join(dir, 'db.sqlite');
  const db = new Database(file);
  hardenConnection(db);
  db.pragma('journal_mode = WAL');
  ensureCallsTable(db);
  db.exec(SCHEMA + extra);
  return { dir, file, db };
}

function close(f: Fixture): void {
  if (f.db.open) f.db.close();
  fs.rmSync(f.dir, { recursive: true, force: true });
}

const json = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? String(x) : x));

function fileHash(file: string): string {
  const h = crypto.createHash('sha256');
  h.update(fs.readFileSync(file));
  if (fs.existsSync(`${file}-wal`)) h.update(fs.readFileSync(`${file}-wal`));
  return h.digest('hex');
}

/** Everything a statement must not change behind the agent's back. */
function snapshot(db: Database.Database) {
  return {
    schema: db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name').all(),
    temp: db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get(),
    calls: db.prepare("SELECT call_id, result FROM _agentdb_calls WHERE call_id NOT LIKE 'rt-%' ORDER BY call_id").all(),
    databases: (db.pragma('database_list') as { name: string }[]).map((r) => r.name),
    settings: ['trusted_schema', 'writable_schema', 'foreign_keys', 'query_only', 'user_version', 'application_id', 'journal_mode'].map((p) =>
      db.pragma(p, { simple: true }),
    ),
  };
}

/** The contents of every agent table, as a reader of the agent's data would see them. */
function agentData(db: Database.Database): string {
  const tables = db
    .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_agentdb\\_%' ESCAPE '\\'")
    .pluck()
    .all() as string[];
  return json(tables.map((t) => db.prepare(`SELECT * FROM "${t.replaceAll('"', '""')}"`).all()));
}

type Tool = 'query' | 'write' | 'drop';
interface Outcome {
  ok: boolean;
  code?: string;
  reason?: string;
  result?: unknown;
  /** What happened that must not have. */
  harm: string[];
}

let callNo = 0;

/** Runs one agent call through the store and reports the verdict and any harm done. */
function attempt(tool: Tool, input: string, opts: { extra?: string; params?: Param[] } = {}): Outcome {
  const f = fixture(opts.extra);
  try {
    const { db } = f;
    db.pragma('wal_checkpoint(TRUNCATE)');
    const hash = fileHash(f.file);
    const before = snapshot(db);
    const out: Outcome = { ok: false, harm: [] };
    try {
      const params = opts.params ?? [];
      if (tool === 'query') out.result = query(db, input, params, 100, 1 << 20);
      else if (tool === 'write') out.result = write(db, input, params, `rt-${callNo++}`, LIMITS);
      else out.result = drop(db, input, `rt-${callNo++}`);
      out.ok = true;
    } catch (err) {
      out.code = (err as { code?: string }).code;
      out.reason = (err as Error).message;
    }
    const after = snapshot(db);
    if (db.inTransaction) out.harm.push('left a transaction open');
    if (json(after.calls) !== json(before.calls)) out.harm.push('_agentdb_calls changed');
    if (json(after.databases) !== json(before.databases)) out.harm.push('a database was attached');
    if (json(after.settings) !== json(before.settings)) out.harm.push(`settings changed: ${json(after.settings)}`);
    if (after.temp !== 0) out.harm.push('a temp object exists');
    if (json(out.result).toUpperCase().includes(SECRET)) out.harm.push('the answer holds the secret');
    if (tool === 'query') {
      if (fileHash(f.file) !== hash) out.harm.push('a query changed the file');
      if (json(after.schema) !== json(before.schema)) out.harm.push('a query changed the schema');
    } else {
      if (agentData(db).toUpperCase().includes(SECRET)) out.harm.push('the secret was copied into an agent table');
      const names = new Set((after.schema as { name: string }[]).map((o) => o.name));
      for (const o of after.schema as { type: string; name: string; sql: string | null }[]) {
        if (o.type === 'trigger') out.harm.push(`created trigger ${o.name}`);
        if (/^create\s+virtual/i.test(o.sql ?? '')) out.harm.push(`created virtual table ${o.name}`);
        if (/^_agentdb_/i.test(o.name) && o.name !== '_agentdb_calls') out.harm.push(`created ${o.name}`);
        if (/^sqlite_/i.test(o.name) && !/^sqlite_(autoindex_|sequence$)/i.test(o.name)) out.harm.push(`created ${o.name}`);
      }
      if (!names.has('_agentdb_calls')) out.harm.push('_agentdb_calls vanished');
      const gone = (before.schema as { name: string; tbl_name: string }[]).filter((o) => !names.has(o.name));
      const renamed = tool === 'write' && /\bRENAME\b/i.test(input);
      const dropped = tool === 'drop' ? gone.filter((o) => o.tbl_name !== input) : gone;
      if (!renamed && dropped.length > 0) out.harm.push(`vanished: ${dropped.map((o) => o.name).join(', ')}`);
    }
    return out;
  } finally {
    close(f);
  }
}

describe('red team: the guard answers, it never throws', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });
  afterEach(() => close(f));

  it('answers a parameter whose name holds a lone surrogate (SQLite reads it as U+FFFD)', () => {
    for (const sql of ['SELECT :\ud800', 'SELECT @a\udc00b', 'SELECT $\ud800x, :y']) {
      expect(() => prepareChecked(f.db, sql, 'read'), JSON.stringify(sql)).not.toThrow();
      expect(prepareChecked(f.db, sql, 'read'), JSON.stringify(sql)).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
    }
  });

  it('refuses lone surrogates anywhere, since SQLite would read another character than the one judged', () => {
    for (const sql of ["SELECT '\ud800'", 'SELECT "\udfff"', 'SELECT 1 -- \ud800', 'SELECT a\ud800 FROM t']) {
      expect(tokenize(sql), JSON.stringify(sql)).toMatchObject({ ok: false, reason: expect.stringMatching(/surrogate/) });
      expect(guardQuery(sql), JSON.stringify(sql)).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
    }
    expect(guardWrite("INSERT INTO t (b) VALUES ('\ud83d')")).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
    expect(guardTableName('t\ud800')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    // A well-formed pair is one character, and fine.
    expect(guardQuery("SELECT '😀' AS \"😀\"")).toMatchObject({ ok: true });
    expect(attempt('query', "SELECT '😀' AS e").result).toMatchObject({ rows: [['😀']] });
  });
});

/**
 * Layer 2 on its own, as if the tokenizer had been fooled into the kind given: what it lets
 * through must be only what SQLite itself adds to an allowed statement.
 */
describe('red team: layer 2 alone', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture('CREATE TABLE t3 (a INTEGER PRIMARY KEY AUTOINCREMENT, b);');
  });
  afterEach(() => close(f));

  it("opens sqlite_sequence only for AUTOINCREMENT's own bookkeeping, never for the agent to read", () => {
    for (const sql of [
      'INSERT INTO t (b) SELECT name FROM sqlite_sequence',
      'INSERT INTO t (b) SELECT 1 UNION ALL SELECT seq FROM sqlite_sequence',
      "INSERT INTO t (b) VALUES ('x') RETURNING (SELECT group_concat(name) FROM sqlite_sequence)",
      "INSERT INTO t (b) VALUES ((SELECT seq FROM sqlite_sequence WHERE name = 't'))",
      'INSERT INTO u (x) SELECT seq FROM sqlite_sequence',
      'UPDATE t SET b = (SELECT max(seq) FROM sqlite_sequence)',
      "INSERT INTO t3 (b) SELECT name FROM sqlite_sequence WHERE name <> 't3'",
    ]) {
      for (const kind of ['insert', 'update', 'create_table'] as const) {
        const r = engineCheck(f.db, sql, 'write', kind);
        expect(r, `${kind}: ${sql}`).toMatchObject({ ok: false, code: 'SQL_REFUSED', reason: expect.stringMatching(/sqlite_sequence/) });
      }
    }
  });

  it('still lets every AUTOINCREMENT write through, and runs it', () => {
    for (const [sql, kind] of [
      ["INSERT INTO t (b) VALUES ('x')", 'insert'],
      ['INSERT INTO t DEFAULT VALUES RETURNING a', 'insert'],
      ['INSERT INTO t (b) SELECT b FROM t3', 'insert'],
      ['INSERT INTO t3 (b) SELECT b FROM t', 'insert'],
      ["REPLACE INTO t (a, b) VALUES (1, 'r')", 'replace'],
      ["INSERT INTO t (a, b) VALUES (1, 'u') ON CONFLICT (a) DO UPDATE SET b = excluded.b", 'insert'],
      ["WITH n(v) AS (VALUES ('w')) INSERT INTO t (b) SELECT v FROM n RETURNING *", 'insert'],
      ["INSERT OR IGNORE INTO t3 (b) VALUES ('i')", 'insert'],
      ['ALTER TABLE t RENAME TO t_renamed', 'alter_table'],
    ] as const) {
      const r = engineCheck(f.db, sql, 'write', kind);
      expect(r, sql).toMatchObject({ ok: true });
      if (r.ok) (r.stmt.reader ? r.stmt.all() : r.stmt.run());
    }
    expect(f.db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 't3'").pluck().get()).toBe(5);
  });

  it('judges what a view reads when the view is created, not only when it is queried', () => {
    for (const sql of [
      'CREATE VIEW v AS SELECT * FROM _agentdb_calls',
      'CREATE VIEW v AS SELECT sql FROM sqlite_master',
      'CREATE VIEW IF NOT EXISTS main.v (a, b) AS SELECT name, seq FROM sqlite_sequence',
      'CREATE VIEW v AS WITH c AS (SELECT * FROM _agentdb_calls) SELECT 1 FROM c',
      'CREATE VIEW v AS SELECT * FROM t WHERE a IN (SELECT rowid FROM _agentdb_calls)',
      'CREATE VIEW v AS SELECT * FROM pragma_table_list',
      'CREATE VIEW v AS SELECT * FROM dbstat',
      'CREATE VIEW "v" AS VALUES ((SELECT count(*) FROM sqlite_schema))',
    ]) {
      expect(engineCheck(f.db, sql, 'write', 'create_view'), sql).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    }
    for (const sql of [
      'CREATE VIEW v AS SELECT * FROM t JOIN u ON u.x = t.a',
      "CREATE VIEW v AS SELECT value FROM json_each('[1]')",
      'CREATE VIEW v (n) AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 3) SELECT n FROM r',
      // SQLite lets a view name what does not exist yet; it is judged again when queried.
      'CREATE VIEW v AS SELECT * FROM not_yet',
      'CREATE VIEW "AS" AS SELECT 1',
    ]) {
      expect(engineCheck(f.db, sql, 'write', 'create_view'), sql).toMatchObject({ ok: true });
    }
  });
});
