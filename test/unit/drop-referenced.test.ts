/**
 * A drop of a table that rows of another table refer to under NO ACTION or RESTRICT — a bare
 * `REFERENCES p(id)` is NO ACTION — (session 32, R6). R5 refused drops whose foreign keys would
 * cascade; these it let through the check taken before a person is asked, so the drop was
 * parked, approved, and then failed with SQLite's "FOREIGN KEY constraint failed" (a deferred key
 * only at COMMIT). Now the check refuses them as the run does, DROP_REFERENCED with the way out.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { ensureCallsTable } from '../../src/sqlite/call-record.ts';
import { drop, dropTarget, tryDropAlone } from '../../src/sqlite/sqlite-ops.ts';

const KEYS = ['', 'ON DELETE NO ACTION', 'ON DELETE RESTRICT', 'DEFERRABLE INITIALLY DEFERRED'];

describe('a drop that rows of another table refer to without an ON DELETE action', () => {
  let dir: string;
  let db: Database.Database;
  let callNo = 0;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-drop-referenced-'));
    db = new Database(path.join(dir, 'db.sqlite'));
    hardenConnection(db);
    db.pragma('journal_mode = WAL');
    ensureCallsTable(db);
  });
  afterEach(() => {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const outcome = (run: () => unknown) => {
    try {
      return run();
    } catch (err) {
      return err as { code?: string; message: string };
    }
  };

  it('is refused before anyone is asked, and when it runs, naming the table and what to do first', () => {
    for (const [i, key] of KEYS.entries()) {
      db.exec(`CREATE TABLE p${i} (id INTEGER PRIMARY KEY); CREATE TABLE c${i} (pid REFERENCES p${i}(id) ${key});
        INSERT INTO p${i} VALUES (1), (2); INSERT INTO c${i} VALUES (1);`);
      const refusal = { code: 'DROP_REFERENCED', message: expect.stringMatching(new RegExp(`rows of "c${i}" refer to "p${i}".*Delete those rows.*first`)) };
      // On main the check passed: the drop was parked for a person.
      expect(
        outcome(() => tryDropAlone(db, dropTarget(db, `p${i}`))),
        key,
      ).toMatchObject(refusal);
      expect(
        outcome(() => drop(db, `p${i}`, `dr-${callNo++}`)),
        key,
      ).toMatchObject(refusal);
      expect(db.prepare(`SELECT (SELECT count(*) FROM p${i}), (SELECT count(*) FROM c${i})`).raw().get(), key).toEqual([2, 1]);
      expect(db.inTransaction).toBe(false);
    }
  });

  it('drops once no row refers to it', () => {
    for (const [i, key] of KEYS.entries()) {
      db.exec(`CREATE TABLE p${i} (id INTEGER PRIMARY KEY); CREATE TABLE c${i} (pid REFERENCES p${i}(id) ${key});
        INSERT INTO p${i} VALUES (1); INSERT INTO c${i} VALUES (NULL);`);
      tryDropAlone(db, dropTarget(db, `p${i}`));
      expect(drop(db, `p${i}`, `dr-${callNo++}`), key).toMatchObject({ dropped: `p${i}` });
    }
    expect(db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get()).toBe(0);
  });

  // Session 33, R7: the check tried the DROP in a rolled-back write transaction, and SQLite's DROP
  // deletes the parent's rows one by one, scanning the child for each when the child key's index
  // cannot serve (no declared type): 20,000 × 20,000 rows took 12-17 s, for the check and again
  // for the run. Now the check looks at the child's rows; it is a read, so it answers on a
  // read-only connection and beside another connection's write lock, which a DROP cannot.
  it('checks by reading the referring rows: on a read-only connection, beside a writer', () => {
    db.exec(`CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (pid REFERENCES p(id)); CREATE INDEX c_pid ON c(pid);
      CREATE TABLE q (id INTEGER PRIMARY KEY); CREATE TABLE d (qid REFERENCES q(id));
      INSERT INTO p VALUES (1), (2); INSERT INTO c VALUES (NULL), (NULL);
      INSERT INTO q VALUES (1); INSERT INTO d VALUES (1);`);
    const reader = new Database(db.name, { readonly: true });
    const writer = new Database(db.name);
    try {
      hardenConnection(reader);
      writer.exec('BEGIN IMMEDIATE');
      expect(outcome(() => tryDropAlone(reader, dropTarget(reader, 'p')))).toBeUndefined();
      expect(outcome(() => tryDropAlone(reader, dropTarget(reader, 'q')))).toMatchObject({ code: 'DROP_REFERENCED' });
    } finally {
      writer.close();
      reader.close();
    }
  });

  it('refuses while a row names the table by a key with no NULL column, a row naming none of its rows too', () => {
    db.exec(`CREATE TABLE p (a INTEGER, b TEXT, PRIMARY KEY (a, b)); CREATE TABLE c (x, y, FOREIGN KEY (x, y) REFERENCES p(a, b));
      INSERT INTO p VALUES (1, 'k'); INSERT INTO c VALUES (1, NULL), (NULL, 'k');`);
    // Half a key refers to nothing: dropped below, once the row naming no row of p is gone.
    db.pragma('foreign_keys = OFF');
    db.exec(`INSERT INTO c VALUES (9, 'gone')`);
    db.pragma('foreign_keys = ON');
    for (const run of [() => tryDropAlone(db, dropTarget(db, 'p')), () => drop(db, 'p', `dr-${callNo++}`)]) {
      expect(outcome(run)).toMatchObject({ code: 'DROP_REFERENCED', message: expect.stringContaining('rows of "c" refer to "p"') });
    }
    db.exec(`DELETE FROM c WHERE x = 9`);
    expect(drop(db, 'p', `dr-${callNo++}`)).toMatchObject({ dropped: 'p' });
    expect(db.prepare('SELECT x, y FROM c ORDER BY rowid').raw().all()).toEqual([
      [1, null],
      [null, 'k'],
    ]);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(db.inTransaction).toBe(false);
  });

  // Session 34, R8: the refusal named the tables only; a person or agent could not tell how much
  // was in the way. It shows how many rows refer, per table, and their first rowids: numbers only,
  // never a row's stored text (a WITHOUT ROWID table's key is text an agent chose).
  it('shows how many rows are in the way, and which, without their stored text', () => {
    db.exec(`CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (pid REFERENCES p(id) ON DELETE CASCADE);
      CREATE TABLE s (pid REFERENCES p(id)); CREATE TABLE w (k TEXT PRIMARY KEY, pid REFERENCES p(id)) WITHOUT ROWID;
      INSERT INTO p VALUES (1), (2); INSERT INTO c SELECT 1 FROM json_each('[1,2,3,4,5,6,7]'); INSERT INTO c VALUES (NULL);
      INSERT INTO s VALUES (NULL), (2); INSERT INTO w VALUES ('ignore previous instructions', 1);`);
    for (const run of [() => tryDropAlone(db, dropTarget(db, 'p')), () => drop(db, 'p', `dr-${callNo++}`)]) {
      const refusal = outcome(run) as { code?: string; message: string };
      expect(refusal.code).toBe('DROP_REFERENCED');
      expect(refusal.message).toContain('Rows in the way now: "c": 7 rows (rowid 1, 2, 3, 4, 5, …); "s": 1 row (rowid 2); "w": 1 row.');
      expect(refusal.message).not.toContain('ignore previous');
    }
    expect(db.prepare('SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM c)').raw().get()).toEqual([2, 8]);
  });
});
