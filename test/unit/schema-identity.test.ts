import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { MAX_SHARED_SCHEMA_BYTES, schemaIdentity, SharedVerdicts } from '../../src/sqlite/shared-verdicts.ts';

// The identity a handle cache miss reads from the main schema alone (issue 31): each case would
// pass a read's admission to a schema it does not hold if the cheap path skipped a check.
const open: Database.Database[] = [];
const dirs: string[] = [];

function handle(file: string, schema = ''): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  if (schema) db.exec(schema);
  hardenConnection(db);
  open.push(db);
  return db;
}

function folder(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-identity-'));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const db of open.splice(0)) db.close();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe('schemaIdentity', () => {
  it('gives a handle whose temp schema changed and emptied again the digest of one that never touched it', () => {
    const schema = 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX kv_v ON kv (v)';
    const fresh = handle(':memory:', schema);
    const touched = handle(':memory:', schema);
    // After hardenConnection, whose temp_store resets the temp schema.
    touched.exec('CREATE TEMP TABLE scratch (x); DROP TABLE scratch');
    expect(schemaIdentity(touched).version).not.toMatch(/\.0$/);
    expect(schemaIdentity(fresh).version).toMatch(/\.0$/);
    expect(schemaIdentity(touched).digest).toBe(schemaIdentity(fresh).digest);
    expect(schemaIdentity(touched).bytes).toBe(schemaIdentity(fresh).bytes);
  });

  it('tells apart a handle with a temp object shadowing a main one, and shares no admission with it', () => {
    const verdicts = new SharedVerdicts();
    const plain = handle(':memory:', 'CREATE TABLE t (a)');
    const shadowed = handle(':memory:', 'CREATE TABLE t (a)');
    expect(verdicts.check(plain, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    // Trusted SQL, as no agent could: a temp view named as the table, over the engine's own table.
    shadowed.unsafeMode(true);
    shadowed.exec('CREATE TEMP VIEW t AS SELECT name AS a FROM sqlite_master');
    shadowed.unsafeMode(false);
    expect(schemaIdentity(shadowed).digest).not.toBe(schemaIdentity(plain).digest);
    expect(verdicts.check(shadowed, 'SELECT a FROM t', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });

  it('sees a schema change another handle of the same file committed', () => {
    const verdicts = new SharedVerdicts();
    const file = path.join(folder(), 'db.sqlite');
    const reader = handle(file, 'CREATE TABLE t (a)');
    const writer = handle(file);
    expect(verdicts.check(reader, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    const before = schemaIdentity(reader);
    writer.exec('DROP TABLE t; CREATE VIEW t AS SELECT name AS a FROM sqlite_master');
    expect(schemaIdentity(reader).version).not.toBe(before.version);
    expect(schemaIdentity(reader).digest).not.toBe(before.digest);
    expect(verdicts.check(reader, 'SELECT a FROM t', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });

  it('reads a file replaced by another of the same schema version afresh on its next handle', () => {
    const verdicts = new SharedVerdicts();
    const dir = folder();
    const file = path.join(dir, 'db.sqlite');
    const first = handle(file, 'CREATE TABLE t (a)');
    expect(verdicts.check(first, 'SELECT a FROM t', 'read')).toMatchObject({ ok: true });
    const digest = schemaIdentity(first).digest;
    const version = schemaIdentity(first).version;
    first.close();
    // Made elsewhere with the same number of schema changes, then renamed over it (as a restore does).
    const other = path.join(dir, 'other.sqlite');
    const maker = new Database(other);
    maker.unsafeMode(true);
    maker.exec('CREATE VIEW t AS SELECT name AS a FROM sqlite_master');
    maker.close();
    fs.renameSync(other, file);
    for (const end of ['-wal', '-shm']) fs.rmSync(file + end, { force: true });
    const next = handle(file);
    expect(schemaIdentity(next).version).toBe(version);
    expect(schemaIdentity(next).digest).not.toBe(digest);
    expect(verdicts.check(next, 'SELECT a FROM t', 'read')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });

  it('sums a schema past the cap in SQL, whether one object or many small ones pass it, and hashes none of it', () => {
    const many = Array.from({ length: Math.ceil(MAX_SHARED_SCHEMA_BYTES / 900) + 2 }, (_, i) => `CREATE TABLE t${i} (a DEFAULT '${'x'.repeat(850)}')`);
    for (const schema of [many.join(';'), `CREATE TABLE t (a DEFAULT '${'x'.repeat(MAX_SHARED_SCHEMA_BYTES)}')`]) {
      const db = handle(':memory:', schema);
      const sum = db.prepare('SELECT sum(length(CAST(sql AS BLOB))) FROM sqlite_schema').pluck().get() as number;
      expect(sum).toBeGreaterThan(MAX_SHARED_SCHEMA_BYTES);
      expect(schemaIdentity(db)).toEqual({ version: schemaIdentity(db).version, bytes: sum });
    }
    const under = handle(':memory:', many.slice(0, 10).join(';'));
    expect(schemaIdentity(under).bytes).toBe(under.prepare('SELECT sum(length(CAST(sql AS BLOB))) FROM sqlite_schema').pluck().get());
    expect(schemaIdentity(under).digest).toMatch(/^[0-9a-f]{64}$/);
  });
});
