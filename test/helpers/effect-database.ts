import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { ensureCallsTable } from '../../src/sqlite/call-record.ts';
import { write } from '../../src/sqlite/sqlite-ops.ts';

/** A pro database's limits, its tables and bytes set where the effect tests want them. */
export const EFFECT_TEST_LIMITS = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 100 * 1024 * 1024 };

/** How much of an effect is kept for a person, unless a test asks for more. */
export const EFFECT_TEST_FX = { maxRows: 100, maxBytes: 100_000 };

/**
 * A database as an executor child holds one (hardened, WAL, the exactly-once record's table) in a
 * temp folder of its own, made before each test of the describe that calls this (`schema` run in
 * it) and removed after: for the tests of approving a write's effect, which preview a write, let
 * another caller change the data, and run the write with the approved digest.
 */
export function effectDatabase(tmpPrefix: string, schema?: string, fx = EFFECT_TEST_FX) {
  let dir = '';
  let db: Database.Database | undefined;
  let callNo = 0;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
    db = new Database(path.join(dir, 'db.sqlite'));
    hardenConnection(db);
    db.pragma('journal_mode = WAL');
    ensureCallsTable(db);
    if (schema) db.exec(schema);
  });
  afterEach(() => {
    db?.close();
    db = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const open = (): Database.Database => {
    if (!db) throw new Error('effectDatabase: used outside a test');
    return db;
  };
  return {
    /** This test's connection. */
    get db() {
      return open();
    },
    /** Another caller's write, which needs no approval (a member, or an agent without `approval: "write"`). */
    meanwhile(...sqls: string[]) {
      for (const sql of sqls) write(open(), sql, [], `other-${callNo++}`, EFFECT_TEST_LIMITS);
    },
    /** The write run as its approval runs it: with the digest the person approved; a refusal is returned. */
    approvedRun(sql: string, digest: string) {
      try {
        return write(open(), sql, [], `approved-${callNo++}`, EFFECT_TEST_LIMITS, undefined, undefined, { digest, limits: fx });
      } catch (err) {
        return err as { code?: string };
      }
    },
  };
}
