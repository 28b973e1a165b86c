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
import { engineCheck, hardenConnection, positionalBindings, prepareChecked } from '../../src/guard/engine-check.ts';
import { guardQuery, guardTableName, guardWrite } from '../../src/guard/guard.ts';
import { tokenize } from '../../src/guard/tokenizer.ts';
import { ensureCallsTable } from '../../src/sqlite/call-record.ts';
import { ACTIVITY_TABLE } from '../../src/sqlite/sqlite-activity.ts';
import { dropObject, dropTarget } from '../../src/sqlite/sqlite-drop.ts';
import { NO_ROWS_EFFECT } from '../../src/sqlite/sqlite-effect.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { drop, query, tryDropAlone, write } from '../../src/sqlite/sqlite-ops.ts';
import type { Param } from '../../src/sqlite/sqlite-values.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { ATTACKS, type Tool } from './guard-cases/attacks.ts';

const SECRET = 'S3CR3T';
const LIMITS = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 100 * 1024 * 1024 };

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
  INSERT INTO _agentdb_calls (call_id, result, at) VALUES ('planted', '${SECRET}-row', 0);
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

interface Outcome {
  ok: boolean;
  code?: string;
  reason?: string;
  result?: unknown;
  /** What happened that must not have. */
  harm: string[];
}

let callNo = 0;

/** Where a disguised VACUUM INTO would write a copy of the database. */
const COPY = '/tmp/agentdb-redteam-copy.db';

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
    if (fs.existsSync(COPY)) out.harm.push(`${COPY} was written`);
    const files = fs.readdirSync(f.dir).filter((n) => !/^db\.sqlite(-wal|-shm)?$/.test(n));
    if (files.length > 0) out.harm.push(`files appeared: ${files.join(', ')}`);
    if (json(after.calls) !== json(before.calls)) out.harm.push('_agentdb_calls changed');
    if (json(after.databases) !== json(before.databases)) out.harm.push('a database was attached');
    if (json(after.settings) !== json(before.settings)) out.harm.push(`settings changed: ${json(after.settings)}`);
    if (after.temp !== 0) out.harm.push('a temp object exists');
    if ((json(out.result) ?? '').toUpperCase().includes(SECRET)) out.harm.push('the answer holds the secret');
    if (tool === 'query') {
      if (fileHash(f.file) !== hash) out.harm.push('a query changed the file');
      if (json(after.schema) !== json(before.schema)) out.harm.push('a query changed the schema');
    } else {
      if (agentData(db).toUpperCase().includes(SECRET)) out.harm.push('the secret was copied into an agent table');
      const names = new Set((after.schema as { name: string }[]).map((o) => o.name));
      for (const o of after.schema as { type: string; name: string; sql: string | null }[]) {
        if (o.type === 'trigger') out.harm.push(`created trigger ${o.name}`);
        if (/^create\s+virtual/i.test(o.sql ?? '')) out.harm.push(`created virtual table ${o.name}`);
        // agentdb's own: the calls table and the index its prune reads (`ensureCallsTable`), and the
        // activity table each call's transaction writes (`ensureActivityTable`).
        if (/^_agentdb_/i.test(o.name) && !AGENTDB_OWN.has(o.name)) out.harm.push(`created ${o.name}`);
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
    expect(guardQuery('SELECT \'😀\' AS "😀"')).toMatchObject({ ok: true });
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
      if (r.ok) r.stmt.reader ? r.stmt.all() : r.stmt.run();
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

/** The tables agentdb itself keeps in an agent's file; any other `_agentdb_` name is an attack's. */
const AGENTDB_OWN = new Set(['_agentdb_calls', '_agentdb_calls_at', ACTIVITY_TABLE]);

describe('red team: end to end through query, write and drop', () => {
  it('the harness sees harm when there is some', () => {
    const trigger = attempt('write', "INSERT INTO t (b) VALUES ('x')", { extra: 'CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;' });
    expect(trigger.harm).toContain('created trigger tr');
    const leaked = attempt('write', "INSERT INTO t (b) VALUES ('x')", { extra: `INSERT INTO u VALUES (9, '${SECRET}', NULL);` });
    expect(leaked.harm).toContain('the secret was copied into an agent table');
    expect(attempt('query', 'SELECT * FROM t').harm).toEqual([]);
  });

  for (const group of ATTACKS) {
    describe(`${group.tool}: ${group.why}`, () => {
      for (const input of group.inputs) {
        it(JSON.stringify(input).slice(0, 120), () => {
          const out = attempt(group.tool, input, { extra: group.extra });
          expect(out.harm, `${JSON.stringify(input)} → ${out.ok ? json(out.result) : `${out.code}: ${out.reason}`}`).toEqual([]);
          if (group.expect === 'refused') {
            expect(out.ok, `${JSON.stringify(input)} was accepted: ${json(out.result)}`).toBe(false);
            expect(out.code).toMatch(/^(SQL_REFUSED|SQL_SYNTAX|SQL_MULTIPLE_STATEMENTS|SQL_ERROR|NOT_FOUND)$/);
          }
          if (group.expect === 'allowed') expect(out.ok, `${out.code}: ${out.reason}`).toBe(true);
        });
      }
    });
  }
});

/** An agent's everyday schema: the words the guard watches for, used as ordinary names. */
const EVERYDAY = `
  CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, tags TEXT DEFAULT '[]', created_at TEXT DEFAULT CURRENT_TIMESTAMP,
    temp REAL, status TEXT, "order" INT, key TEXT, value TEXT, type TEXT);
  INSERT INTO notes (body, tags, temp, status, key, value, type) VALUES
    ('hello', '["a","b"]', 21.5, 'open', 'k', 'v', 'memo'), ('drop table soon', '[]', 30, 'done', 'k2', 'v2', 'todo');
  CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT UNIQUE, manager_id INTEGER REFERENCES people(id));
  INSERT INTO people VALUES (1, 'ann', NULL), (2, 'bob', 1);
  CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
`;

const EVERYDAY_SQL: ReadonlyArray<[tool: 'query' | 'write', sql: string, params?: Param[]]> = [
  ['query', "SELECT * FROM notes WHERE status = 'open' ORDER BY created_at DESC LIMIT 10"],
  ['query', 'SELECT n.id, j.value AS tag FROM notes n, json_each(n.tags) j'],
  ['query', 'SELECT n.id, json_group_array(j.value) FROM notes n LEFT JOIN json_each(n.tags) AS j GROUP BY n.id'],
  ['query', 'SELECT status, count(*) AS c FROM notes GROUP BY status HAVING c > 0 ORDER BY c DESC'],
  ['query', "SELECT * FROM notes WHERE body LIKE '%' || ? || '%'", ['drop']],
  ['query', "SELECT date('now', '-7 days'), strftime('%Y', created_at), unixepoch() FROM notes"],
  [
    'query',
    'WITH RECURSIVE chain(id, name, depth) AS (SELECT id, name, 0 FROM people WHERE manager_id IS NULL UNION ALL ' +
      'SELECT p.id, p.name, depth + 1 FROM people p JOIN chain c ON p.manager_id = c.id) SELECT * FROM chain',
  ],
  ['query', 'SELECT temp FROM notes WHERE temp > 25'],
  ['query', 'SELECT n.temp, n."order", n.key, n.value, n.type FROM notes AS n'],
  ['query', 'SELECT * FROM notes AS temp WHERE temp.temp > 0'],
  ['query', 'SELECT main.notes.temp FROM main.notes'],
  ['query', "SELECT * FROM notes WHERE type IN ('memo', 'todo') AND key NOT IN ('sqlite_master', '_agentdb_calls')"],
  ['query', "SELECT body FROM notes WHERE body = 'drop table soon'"],
  ['query', 'SELECT rank() OVER (ORDER BY temp DESC), percent_rank() OVER w FROM notes WINDOW w AS (PARTITION BY status ORDER BY id)'],
  ['query', "SELECT * FROM people p1 LEFT JOIN people p2 ON p2.id = p1.manager_id WHERE p2.name IS NULL OR p2.name LIKE 'a%'"],
  ['query', 'SELECT median(temp), percentile(temp, 90), group_concat(DISTINCT status) FROM notes'],
  ['query', 'SELECT * FROM notes LIMIT ? OFFSET ?', [1, 1]],
  ['query', 'SELECT * FROM notes WHERE id IN (SELECT value FROM json_each(?))', ['[1,2]']],
  ['query', "SELECT 'temp.x', 'main.sqlite_master', 'pragma_table_list'"],
  ['query', "VALUES ('temp', 'sqlite'), ('drop', 'pragma')"],
  ['query', 'SELECT sqlite_version(), sqlite_source_id()'],
  ['query', 'SELECT \'😀\' AS "🙂"'],
  ['query', 'SELECT * FROM notes WHERE id = (SELECT max(id) FROM notes) UNION SELECT * FROM notes WHERE temp > 25 ORDER BY 1'],
  ['write', 'INSERT INTO notes (body, tags) VALUES (?, ?) RETURNING id, created_at', ['x', '[]']],
  ['write', "INSERT INTO counters (name, n) VALUES ('x', 1) ON CONFLICT(name) DO UPDATE SET n = n + excluded.n"],
  ['write', "INSERT OR IGNORE INTO people (name) VALUES ('ann')"],
  ['write', "UPDATE notes SET status = 'done' WHERE id = ? RETURNING *", [1]],
  ['write', 'UPDATE notes SET status = p.name FROM people p WHERE p.id = notes.id'],
  ['write', "DELETE FROM notes WHERE status = 'done' RETURNING id"],
  ['write', "REPLACE INTO counters VALUES ('y', 2)"],
  [
    'write',
    'CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0 ' +
      'CHECK (done IN (0, 1)), owner INTEGER REFERENCES people(id) ON DELETE SET NULL)',
  ],
  ['write', 'CREATE INDEX IF NOT EXISTS notes_status ON notes(status, created_at DESC)'],
  ['write', 'CREATE UNIQUE INDEX people_name ON people(name COLLATE NOCASE) WHERE name IS NOT NULL'],
  ['write', "CREATE VIEW open_notes AS SELECT * FROM notes WHERE status = 'open'"],
  ['write', 'CREATE VIEW tagcounts(tag, n) AS SELECT j.value, count(*) FROM notes, json_each(notes.tags) j GROUP BY 1'],
  ['write', 'ALTER TABLE notes ADD COLUMN priority INTEGER NOT NULL DEFAULT 0'],
  ['write', 'ALTER TABLE notes RENAME COLUMN body TO text'],
  ['write', 'ALTER TABLE notes RENAME TO memos'],
  ['write', 'CREATE TABLE readings (sensor TEXT, temp REAL, ts TEXT, PRIMARY KEY (sensor, ts)) STRICT'],
  ['write', 'CREATE TABLE doubled (x INTEGER, y INTEGER GENERATED ALWAYS AS (x * 2) VIRTUAL)'],
  ['write', 'CREATE TABLE summary AS SELECT status, count(*) AS n FROM notes GROUP BY status'],
  ['write', "WITH src(b) AS (VALUES ('a'), ('b')) INSERT INTO notes (body) SELECT b FROM src"],
  ['write', "UPDATE notes SET tags = json_insert(tags, '$[#]', 'new') WHERE id = 1"],
  ['write', "INSERT INTO notes (body) VALUES ('it''s a -- not a comment; /* nor this */ DROP TABLE notes')"],
  ['write', "CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT CHECK (kind IN ('temp', 'drop', 'sqlite')), payload TEXT)"],
  ['write', 'CREATE TABLE drop_log (dropped TEXT)'],
  ['write', "CREATE TABLE log (id INTEGER PRIMARY KEY, at TEXT DEFAULT (datetime('now')), msg TEXT)"],
  ['write', 'DELETE FROM people WHERE id = 2'],
];

describe('red team: ordinary agent SQL is not refused', () => {
  for (const [tool, sql, params] of EVERYDAY_SQL) {
    it(`${tool}: ${sql.slice(0, 110)}`, () => {
      const out = attempt(tool, sql, { extra: EVERYDAY, params });
      expect(out.ok, `${out.code}: ${out.reason}`).toBe(true);
      expect(out.harm).toEqual([]);
    });
  }
});

describe('red team: parameters bound as SQLite numbers them', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });
  afterEach(() => close(f));

  // better-sqlite3 treats ?NNN and :name as named parameters, so a positional list binds none
  // of them ("Too many parameter values"): `WHERE a = ?1 OR b = ?1` was refused as SQL_ERROR.
  it('maps the positional values an agent sends onto ?NNN and named parameters', () => {
    const cases: Array<[string, unknown[], unknown[]]> = [
      ['SELECT ?, ?', [1, 2], [1, 2]],
      ['SELECT ?1, ?1', [5], [5, 5]],
      ['SELECT ?2, ?1', [5, 6], [6, 5]],
      ['SELECT ?, ?1, ?', [5, 6], [5, 5, 6]],
      ['SELECT ?3, ?', [1, 2, 3, 4], [3, 4]],
      ['SELECT :a, :b, :a', ['x', 'y'], ['x', 'y', 'x']],
      ['SELECT @a, ?, $b', [1, 2, 3], [1, 2, 3]],
      ['SELECT ?2, :n', [1, 2, 3], [2, 3]],
      ['SELECT * FROM t WHERE a = ?1 OR b = ?1', [1], [1, 'one']],
    ];
    for (const [sql, values, row] of cases) {
      const bound = positionalBindings(sql, values);
      expect(
        f.db
          .prepare(sql)
          .raw(true)
          .get(...bound),
        sql,
      ).toEqual(row);
    }
  });

  it('leaves a count that does not match for better-sqlite3 to report', () => {
    expect(positionalBindings('SELECT ?1, ?2', [1])).toEqual([1]);
    expect(positionalBindings('SELECT ?', [1, 2])).toEqual([1, 2]);
    expect(positionalBindings("SELECT 'unterminated", [1])).toEqual([1]);
  });
});

describe("red team: db_query's introspection PRAGMAs", () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });
  afterEach(() => close(f));

  // Session 32, R5: `PRAGMA table_list` with no argument listed every table of every schema,
  // agentdb's `_agentdb_calls` and `_agentdb_activity` and the engine's own among them, though
  // the guard refuses each of those names as an argument and DATA_DESCRIBE_SCHEMA hides them.
  it('PRAGMA table_list lists the agent tables only, however it is written, also when asked again', () => {
    for (const sql of ['PRAGMA table_list', 'pragma MAIN.Table_List;', '/* x */ PRAGMA "table_list"', 'PRAGMA main."table_list"']) {
      for (let i = 0; i < 2; i++) {
        const r = query(f.db, sql, [], 100, 1 << 20, 'introspect');
        const names = r.rows.map((row) => String(row[r.columns.indexOf('name')]));
        expect(r.columns, sql).toEqual(['schema', 'name', 'type', 'ncol', 'wr', 'strict']);
        expect(names.sort(), sql).toEqual(['c', 'p', 't', 'tv', 'u']);
        expect(json(r).toUpperCase(), sql).not.toContain('AGENTDB');
        expect(json(r).toUpperCase(), sql).not.toContain('SQLITE_');
      }
    }
    expect(f.db.inTransaction).toBe(false);
  });
});

describe('red team: a drop changes nothing but the object dropped', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture("CREATE TABLE s (pid REFERENCES p(id) ON DELETE SET NULL, note); INSERT INTO s VALUES (1, 'kept');");
  });
  afterEach(() => close(f));

  const rowsOf = (table: string) => f.db.prepare(`SELECT * FROM ${table} ORDER BY rowid`).all();

  // Session 32, R5: with foreign keys on (better-sqlite3's default), DROP TABLE first deletes the
  // table's rows, and ON DELETE CASCADE / SET NULL changed rows of other tables: DATA_DROP_TABLE p,
  // approved as "table p, 2 rows", emptied c and nulled s.pid, which no person was shown.
  it('refuses a drop whose foreign keys would delete or change rows of other tables, and changes nothing', () => {
    const before = { c: rowsOf('c'), s: rowsOf('s'), p: rowsOf('p') };
    const approved = dropObject(f.db, dropTarget(f.db, 'p'));
    // The check before a person is asked (executor's checkDrop) refuses it too.
    expect(() => tryDropAlone(f.db, dropTarget(f.db, 'p'))).toThrow(
      /rows of "c", "s" refer to "p" through their foreign keys: dropping it would also delete or change those rows/,
    );
    expect(f.db.inTransaction).toBe(false);
    for (const expect_ of [undefined, approved]) {
      const out = (() => {
        try {
          return drop(f.db, 'p', `rt-${callNo++}`, expect_);
        } catch (err) {
          return err as { code?: string; message: string };
        }
      })();
      expect(out, json(out)).toMatchObject({ code: 'DROP_REFERENCED', message: expect.stringMatching(/\bc\b.*\bs\b|foreign key/) });
      expect({ c: rowsOf('c'), s: rowsOf('s'), p: rowsOf('p') }).toEqual(before);
      expect(f.db.inTransaction).toBe(false);
    }
  });

  it('drops the table once no row of another table refers to it', () => {
    f.db.exec('DELETE FROM c; UPDATE s SET pid = NULL');
    expect(drop(f.db, 'p', `rt-${callNo++}`)).toMatchObject({ dropped: 'p' });
    expect(rowsOf('s')).toEqual([{ pid: null, note: 'kept' }]);
    expect(drop(f.db, 'u', `rt-${callNo++}`)).toMatchObject({ dropped: 'u' });
    // A table referring to itself loses only its own rows, while another table refers to it too.
    f.db.exec(`CREATE TABLE tree (id INTEGER PRIMARY KEY, up REFERENCES tree(id) ON DELETE SET NULL);
      INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 2);
      CREATE TABLE leaf (tid REFERENCES tree(id) ON DELETE CASCADE); INSERT INTO leaf VALUES (NULL);`);
    expect(drop(f.db, 'tree', `rt-${callNo++}`)).toMatchObject({ dropped: 'tree' });
    expect(rowsOf('leaf')).toEqual([{ tid: null }]);
    expect(f.db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get()).toBe(0);
  });
});

describe('red team: an approved CREATE TABLE … AS SELECT makes the rows approved', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });
  afterEach(() => close(f));

  const FX = { maxRows: 100, maxBytes: 100_000 };
  const approvedRun = (sql: string, digest: string) => {
    try {
      return write(f.db, sql, [], `rt-${callNo++}`, LIMITS, undefined, undefined, { digest, limits: FX });
    } catch (err) {
      return err as { code?: string };
    }
  };

  // Session 32, R5: DDL's effect was empty, so a CTAS was approved with no rows shown and copied
  // whatever its SELECT read at the run: here t's row changed after the approval and went along.
  it('asks again when the rows it would copy changed after the approval, and copies nothing', () => {
    const sql = 'CREATE TABLE snap AS SELECT a, b FROM t';
    const fx = previewEffect(f.db, sql, [], LIMITS, FX);
    expect(fx.tables).toEqual([{ table: 'snap', inserted: 2, updated: 0, deleted: 0 }]);
    expect(fx.rows.map((r) => r.after)).toEqual([
      { a: 1, b: 'one' },
      { a: 2, b: 'two' },
    ]);
    f.db.exec("UPDATE t SET b = 'changed after approval' WHERE a = 1");
    expect(approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(f.db.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'snap'").pluck().get()).toBe(0);
  });

  it('runs when nothing changed, a clock column included; a CREATE TABLE without rows keeps the empty effect', () => {
    const sql = "CREATE TABLE snap AS SELECT a, b, datetime('now') AS at FROM t";
    const fx = previewEffect(f.db, sql, [], LIMITS, FX);
    expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 0 });
    expect(f.db.prepare('SELECT count(*) FROM snap').pluck().get()).toBe(2);
    const empty = previewEffect(f.db, 'CREATE TABLE e (x)', [], LIMITS, FX);
    expect(empty.digest).toBe(NO_ROWS_EFFECT.digest);
    expect(approvedRun('CREATE TABLE e (x)', NO_ROWS_EFFECT.digest)).toMatchObject({ changes: 0 });
  });
});
