import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareChecked, schemaFingerprint } from '../../src/guard/engine-check.ts';
import { anyStatement, anyWrite } from './guard-cases/arbitraries.ts';
import { SECRET, tempDb, type TempDb } from './guard-cases/db.ts';

/** Bytes of the database file and its WAL, the way a reader of the disk would see them. */
function fileHash(file: string): string {
  const h = crypto.createHash('sha256');
  h.update(fs.readFileSync(file));
  if (fs.existsSync(`${file}-wal`)) h.update(fs.readFileSync(`${file}-wal`));
  return h.digest('hex');
}

/** Connection settings a PRAGMA would change — some of them while merely being prepared. */
const SETTINGS = [
  'trusted_schema',
  'writable_schema',
  'foreign_keys',
  'recursive_triggers',
  'ignore_check_constraints',
  'defer_foreign_keys',
  'query_only',
  'journal_mode',
  'user_version',
  'application_id',
  'schema_version',
  'cell_size_check',
  'reverse_unordered_selects',
];

function settings(db: Database): Record<string, unknown> {
  return Object.fromEntries(SETTINGS.map((p) => [p, db.pragma(p, { simple: true })]));
}

function rowCounts(db: Database): Record<string, number> {
  const tables = ['t', 'u', 'p', 'c', '_agentdb_calls', 'sqlite_sequence'];
  return Object.fromEntries(tables.map((t) => [t, db.prepare(`SELECT count(*) FROM "${t}"`).pluck().get() as number]));
}

/**
 * What the query tool does with agent SQL: both guard layers inside a read transaction that
 * is always rolled back, rows read lazily up to a cap. Returns the rows read, or undefined
 * when the statement was refused or failed.
 */
function runAsQuery(db: Database, sql: string): unknown[] | undefined {
  db.prepare('BEGIN').run();
  try {
    // Outside the catch below: the guard answers every statement, it never throws.
    const checked = prepareChecked(db, sql, 'read');
    if (!checked.ok) return undefined;
    const rows: unknown[] = [];
    try {
      for (const row of checked.stmt.iterate()) {
        rows.push(row);
        if (rows.length >= 200) break;
      }
    } catch {
      return undefined; // a runtime error (an unbound parameter, bad JSON) is not a bypass
    }
    return rows;
  } finally {
    if (db.inTransaction) db.prepare('ROLLBACK').run();
  }
}

const VACUUM_COPY = '/tmp/agentdb-guard-vacuum-copy.db';

describe('property: nothing the query path accepts changes the database', () => {
  let tmp: TempDb;
  let hashBefore: string;
  let schemaBefore: string[];
  let countsBefore: Record<string, number>;
  let settingsBefore: Record<string, unknown>;

  beforeAll(() => {
    tmp = tempDb();
    tmp.db.pragma('wal_checkpoint(TRUNCATE)');
    tmp.db.close();
    hashBefore = fileHash(tmp.file);
    tmp.reopen();
    schemaBefore = schemaFingerprint(tmp.db);
    countsBefore = rowCounts(tmp.db);
    settingsBefore = settings(tmp.db);
  });
  afterAll(() => tmp.close());

  it('the harness notices a change when there is one', () => {
    const probe = tempDb();
    try {
      probe.db.pragma('wal_checkpoint(TRUNCATE)');
      const before = fileHash(probe.file);
      probe.db.prepare("INSERT INTO t (b) VALUES ('probe')").run();
      expect(fileHash(probe.file)).not.toBe(before);
      probe.db.pragma('trusted_schema = ON');
      expect(settings(probe.db).trusted_schema).toBe(1);
    } finally {
      probe.close();
    }
  });

  it('holds for generated reads, writes, refused forms, token soup and re-dressed attacks', () => {
    let accepted = 0;
    fc.assert(
      fc.property(anyStatement, (sql) => {
        const rows = runAsQuery(tmp.db, sql);
        if (rows !== undefined) {
          accepted++;
          expect(JSON.stringify(rows).toUpperCase(), sql).not.toContain(SECRET);
        }
        expect(tmp.db.inTransaction, sql).toBe(false);
        expect(fileHash(tmp.file), sql).toBe(hashBefore);
        expect(schemaFingerprint(tmp.db), sql).toEqual(schemaBefore);
        expect(settings(tmp.db), sql).toEqual(settingsBefore);
      }),
      { numRuns: 2000 },
    );
    // A generator that only produced refusals would prove nothing.
    expect(accepted).toBeGreaterThan(200);
  });

  it('leaves the file byte-identical after closing, with every row in place', () => {
    tmp.db.close();
    expect(fileHash(tmp.file)).toBe(hashBefore);
    expect(fs.existsSync(VACUUM_COPY)).toBe(false);
    const db = tmp.reopen();
    expect(rowCounts(db)).toEqual(countsBefore);
    expect(schemaFingerprint(db)).toEqual(schemaBefore);
  });
});

/** What a write left behind that no write may: judged inside its transaction, before rollback. */
function forbiddenEffects(db: Database, callsBefore: string, schemaBefore: string[]): string[] {
  const problems: string[] = [];
  const calls = JSON.stringify(db.prepare('SELECT * FROM _agentdb_calls ORDER BY id').all());
  if (calls !== callsBefore) problems.push('_agentdb_calls changed');
  const schema = schemaFingerprint(db);
  const count = (fp: string[], type: string) => fp.filter((e) => e.startsWith(`${type}:`)).length;
  for (const type of ['table', 'index', 'view']) {
    if (count(schema, type) < count(schemaBefore, type)) problems.push(`a ${type} vanished`);
  }
  if (!schema.includes('table:_agentdb_calls')) problems.push('_agentdb_calls renamed');
  for (const entry of schema) {
    if (entry.startsWith('trigger:')) problems.push(`created ${entry}`);
    if (entry.startsWith('temp_schema:') && entry !== 'temp_schema:0') problems.push('created a temp object');
    if (/^[a-z]+:(?!sqlite_sequence$|sqlite_autoindex_)sqlite_/i.test(entry) && !schemaBefore.includes(entry)) problems.push(`created ${entry}`);
  }
  const virtual = db.prepare("SELECT count(*) FROM sqlite_schema WHERE sql LIKE 'CREATE VIRTUAL%'").pluck().get() as number;
  if (virtual > 0) problems.push('created a virtual table');
  return problems;
}

describe("property: nothing the write path accepts touches what is not the agent's", () => {
  let tmp: TempDb;
  let hashBefore: string;
  let schemaBefore: string[];
  let callsBefore: string;
  let settingsBefore: Record<string, unknown>;

  beforeAll(() => {
    tmp = tempDb();
    tmp.db.pragma('wal_checkpoint(TRUNCATE)');
    hashBefore = fileHash(tmp.file);
    schemaBefore = schemaFingerprint(tmp.db);
    callsBefore = JSON.stringify(tmp.db.prepare('SELECT * FROM _agentdb_calls ORDER BY id').all());
    settingsBefore = settings(tmp.db);
  });
  afterAll(() => tmp.close());

  it('holds for generated writes, DDL, refused forms, token soup and re-dressed attacks', () => {
    let ran = 0;
    fc.assert(
      fc.property(anyWrite, (sql) => {
        const db = tmp.db;
        db.prepare('BEGIN').run();
        try {
          const checked = prepareChecked(db, sql, 'write');
          if (checked.ok) {
            try {
              if (checked.stmt.reader) checked.stmt.all();
              else checked.stmt.run();
              ran++;
            } catch {
              // a constraint or a missing parameter: the statement did nothing
            }
            expect(forbiddenEffects(db, callsBefore, schemaBefore), sql).toEqual([]);
          }
        } finally {
          if (db.inTransaction) db.prepare('ROLLBACK').run();
        }
        // After the rollback: a DDL write moves schema_version inside its transaction only.
        expect(settings(db), sql).toEqual(settingsBefore);
        expect(fileHash(tmp.file), sql).toBe(hashBefore);
        expect(schemaFingerprint(db), sql).toEqual(schemaBefore);
      }),
      { numRuns: 1500 },
    );
    expect(ran).toBeGreaterThan(150);
  });
});
