/**
 * An approved UPDATE that moves a row's rowid (session 34, R8). A rowid table without an INTEGER
 * PRIMARY KEY holds its rowid in no column, and the effect recorded each update's columns before
 * and after, keyed by the old rowid: `UPDATE t SET rowid = (SELECT v FROM src)` was shown as an
 * update that changed nothing, and the run committed whatever rowid `src` held by then.
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

describe('an approved update is bound to the rowid it moves a row to', () => {
  let dir: string;
  let db: Database.Database;
  let callNo = 0;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-effect-rowid-'));
    db = new Database(path.join(dir, 'db.sqlite'));
    hardenConnection(db);
    db.pragma('journal_mode = WAL');
    ensureCallsTable(db);
    db.exec("CREATE TABLE t (a TEXT, b TEXT); INSERT INTO t VALUES ('x', 'one'), ('y', 'two'); CREATE TABLE src (v INTEGER); INSERT INTO src VALUES (100)");
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
  const rowids = () => db.prepare('SELECT rowid, a FROM t ORDER BY rowid').raw().all();

  it('shows the move, and asks again when the rowid it would move to changed', () => {
    for (const sql of [
      "UPDATE t SET rowid = (SELECT v FROM src) WHERE a = 'x'",
      "INSERT INTO t (rowid, a, b) VALUES (1, 'x', 'one') ON CONFLICT (rowid) DO UPDATE SET oid = (SELECT v FROM src)",
    ]) {
      db.exec('UPDATE src SET v = 100');
      const fx = previewEffect(db, sql, [], LIMITS, FX);
      expect(fx.rows, sql).toEqual([
        { table: 't', op: 'update', key: { rowid: 1 }, before: { a: 'x', b: 'one', rowid: 1 }, after: { a: 'x', b: 'one', rowid: 100 } },
      ]);
      db.exec('UPDATE src SET v = 999');
      expect(approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(rowids()).toEqual([
        [1, 'x'],
        [2, 'y'],
      ]);
    }
  });

  it('runs when it moves the row where the person saw it moved, and an update that moves nothing keeps its digest', () => {
    const sql = "UPDATE t SET rowid = (SELECT v FROM src) WHERE a = 'x'";
    const fx = previewEffect(db, sql, [], LIMITS, FX);
    expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
    expect(rowids()).toEqual([
      [2, 'y'],
      [100, 'x'],
    ]);
    const plain = "UPDATE t SET b = 'three' WHERE a = 'y'";
    const seen = previewEffect(db, plain, [], LIMITS, FX);
    expect(seen.rows[0]!.after).toEqual({ a: 'y', b: 'three' });
    expect(approvedRun(plain, seen.digest)).toMatchObject({ changes: 1 });
  });
});
