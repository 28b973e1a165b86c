/**
 * An approved write of values that read alike but are not the same (session 34, R8). SQLite keeps
 * a text's bytes as given (`CAST(x'FF41' AS TEXT)`); read back, each byte that is not UTF-8
 * becomes U+FFFD, so the effect of writing bytes FF 41 and the one of writing FE 41 read alike,
 * "�A", and had one digest: approved with the first, the run committed the second. So did an
 * INTEGER past 2^53 and the TEXT of its digits (both JSON strings), and REAL 1.0 and INTEGER 1.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { ensureCallsTable } from '../../src/sqlite/call-record.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { write } from '../../src/sqlite/sqlite-ops.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

const LIMITS = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 100 * 1024 * 1024 };
const FX = { maxRows: 100, maxBytes: 100_000 };

describe('an approved write is bound to the bytes of the text it writes and overwrites', () => {
  let dir: string;
  let db: Database.Database;
  let callNo = 0;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-effect-text-'));
    db = new Database(path.join(dir, 'db.sqlite'));
    hardenConnection(db);
    db.pragma('journal_mode = WAL');
    ensureCallsTable(db);
    db.exec(
      "CREATE TABLE t (k TEXT PRIMARY KEY, a TEXT) WITHOUT ROWID; INSERT INTO t VALUES ('x', 'plain'); CREATE TABLE src (v BLOB); INSERT INTO src VALUES (x'FF41')",
    );
  });
  afterEach(() => {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const approvedRun = (sql: string, digest: string) => {
    try {
      return write(db, sql, [], `approved-${callNo++}`, LIMITS, undefined, undefined, { digest, limits: FX });
    } catch (err) {
      return err as { code?: string };
    }
  };
  const hexes = () => db.prepare('SELECT hex(k), hex(a) FROM t ORDER BY k').raw().all();

  it('asks again when the bytes it would write, overwrite or key by changed, though they read alike', () => {
    const statements = [
      "UPDATE t SET a = CAST((SELECT v FROM src) AS TEXT) WHERE k = 'x'",
      "INSERT INTO t SELECT CAST(v AS TEXT), 'new' FROM src",
      'CREATE TABLE copied AS SELECT CAST(v AS TEXT) AS v FROM src',
    ];
    for (const sql of statements) {
      db.exec("UPDATE src SET v = x'FF41'");
      const fx = previewEffect(db, sql, [], LIMITS, FX);
      expect(JSON.stringify(fx.rows), sql).toContain('\uFFFDA');
      db.exec("UPDATE src SET v = x'FE41'");
      expect(approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(hexes()).toEqual([['78', '706C61696E']]);
      expect(db.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'copied'").pluck().get()).toBe(0);
    }
    db.exec("UPDATE t SET a = CAST(x'FF41' AS TEXT)");
    const overwrite = "UPDATE t SET a = 'clean' WHERE k = 'x'";
    const fx = previewEffect(db, overwrite, [], LIMITS, FX);
    db.exec("UPDATE t SET a = CAST(x'FE41' AS TEXT)");
    expect(approvedRun(overwrite, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('runs when the bytes are the ones previewed, and binds a real U+FFFD as before', () => {
    const sql = "UPDATE t SET a = CAST((SELECT v FROM src) AS TEXT) WHERE k = 'x'";
    const fx = previewEffect(db, sql, [], LIMITS, FX);
    expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
    expect(hexes()).toEqual([['78', 'FF41']]);
    const replacement = "UPDATE t SET a = 'a \uFFFD b' WHERE k = 'x'";
    const seen = previewEffect(db, replacement, [], LIMITS, FX);
    expect(approvedRun(replacement, seen.digest)).toMatchObject({ changes: 1 });
  });

  it('asks again when an INTEGER past 2^53 became the text of its digits, or an INTEGER a whole REAL', () => {
    db.exec('CREATE TABLE n (v); INSERT INTO n VALUES (NULL); CREATE TABLE s2 (v); INSERT INTO s2 VALUES (9007199254740993)');
    for (const [first, then] of [
      ['9007199254740993', "'9007199254740993'"],
      ['1', '1.0'],
    ]) {
      db.exec(`UPDATE s2 SET v = ${first}`);
      const sql = 'UPDATE n SET v = (SELECT v FROM s2)';
      const fx = previewEffect(db, sql, [], LIMITS, FX);
      db.exec(`UPDATE s2 SET v = ${then}`);
      expect(approvedRun(sql, fx.digest), then).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(db.prepare('SELECT typeof(v) FROM n').pluck().get()).toBe('null');
      expect(approvedRun(sql, previewEffect(db, sql, [], LIMITS, FX).digest), then).toMatchObject({ changes: 1 });
      db.exec('UPDATE n SET v = NULL');
    }
  });
});
