/**
 * The effect recorder installed a log and three triggers on every table of the database,
 * whatever the write touched: ~0.5 ms a table, and on 50 tables of 1,999 columns ~1 s of CPU for
 * each preview and each approved run of a one-row insert (session 34, R8's leftover). It now
 * watches only the tables the statement's program can write, its foreign-key actions' included
 * (session 36, R10).
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { EffectRecorder } from '../../src/sqlite/sqlite-effect.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('the effect recorder watches the tables a write can change', () => {
  const t = effectDatabase(
    'agentdb-effect-written-',
    `CREATE TABLE p (id INTEGER PRIMARY KEY, u UNIQUE, n);
     CREATE TABLE c (id INTEGER PRIMARY KEY, pid REFERENCES p(id) ON DELETE CASCADE ON UPDATE SET NULL);
     CREATE TABLE d (cid REFERENCES c(id) ON DELETE SET DEFAULT, note);
     CREATE TABLE e (x);
     CREATE TABLE src (v);
     CREATE TABLE idle1 (a); CREATE TABLE idle2 (a); CREATE TABLE idle3 (a);
     INSERT INTO p VALUES (1, 'a', 0), (2, 'b', 0);
     INSERT INTO c VALUES (10, 1), (20, 2);
     INSERT INTO d VALUES (10, 'x'), (20, 'y');
     INSERT INTO e VALUES (1), (2);
     INSERT INTO src VALUES (1);`,
  );

  /** The temporary triggers a recorder for `sql` installs, on which tables. */
  function watched(sql: string): string[] {
    const db = t.db;
    db.exec('BEGIN IMMEDIATE');
    try {
      const recorder = new EffectRecorder(db, sql);
      const on = db.prepare("SELECT DISTINCT tbl_name FROM temp.sqlite_schema WHERE type = 'trigger' ORDER BY tbl_name").pluck().all() as string[];
      recorder.remove();
      recorder.restorePragma();
      return on;
    } finally {
      db.exec('ROLLBACK');
    }
  }

  it('installs no log on a table the statement cannot change', () => {
    expect(watched('INSERT INTO e VALUES (3)')).toEqual(['e']);
    expect(watched('UPDATE e SET x = (SELECT v FROM src)')).toEqual(['e']);
    expect(watched('DELETE FROM e')).toEqual(['e']);
  });

  it('still watches every table its foreign-key actions reach, REPLACE and upserts too', () => {
    expect(watched('DELETE FROM p WHERE id = 1')).toEqual(['c', 'd', 'p']);
    expect(watched("REPLACE INTO p (id, u) VALUES (3, 'a')")).toEqual(['c', 'd', 'p']);
    expect(watched('UPDATE p SET id = 5 WHERE id = 1')).toEqual(['c', 'p']);
    expect(watched("INSERT INTO p (id, u) VALUES (1, 'z') ON CONFLICT (id) DO UPDATE SET n = (SELECT v FROM src)")).toEqual(['p']);
    // Rows its actions change are in the effect and bound, as before.
    const sql = "REPLACE INTO p (id, u) VALUES (3, 'a')";
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(fx.tables).toEqual([
      { table: 'c', inserted: 0, updated: 0, deleted: 1 },
      { table: 'd', inserted: 0, updated: 1, deleted: 0 },
      { table: 'p', inserted: 1, updated: 0, deleted: 1 },
    ]);
    t.meanwhile("UPDATE d SET note = 'changed' WHERE cid = 10");
    expect(t.approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });
});
