/**
 * In a statement that calls the clock, a written value that read as a time of the recording's
 * window (a second either side) was left out of the digest, a value copied from another table too,
 * and in whatever form: another caller could swap it, between the approval and the run, for any
 * time of the run's window (thousands of milliseconds to choose from), or for the same time in
 * another type or form (text shown, an INTEGER committed). SQLite gives every clock call of one
 * run of a statement the same instant (`sqlite3StmtCurrentTime`), triggers' included: the recorder
 * reads that instant, and a value is left out only as that instant, bound to its form (session
 * 35, R9's leftover; session 36, R10).
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

/** Waits (the clock is no event) until the wall clock is in a later second than `ms`. */
function nextSecond(ms: number): void {
  while (Math.floor(Date.now() / 1000) === Math.floor(ms / 1000)) {
    /* spin: at most a second */
  }
}

describe('a value that reads as now is left out only as the instant the statement ran at, in its form', () => {
  const t = effectDatabase(
    'agentdb-effect-instant-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, n, at TEXT DEFAULT CURRENT_TIMESTAMP);
     INSERT INTO t (id, n) VALUES (1, 0);
     CREATE TABLE src (v);
     INSERT INTO src VALUES (0);
     CREATE TABLE flag (f INTEGER);
     INSERT INTO flag VALUES (0);`,
  );

  it('asks again when a copied value that reads as now changed, in a statement that calls the clock', () => {
    const sqls = [
      'UPDATE t SET at = CURRENT_TIMESTAMP, n = (SELECT v FROM src) WHERE id = 1',
      'INSERT INTO t (id, n) SELECT 2, v FROM src',
      "INSERT INTO t (id, n, at) VALUES (3, (SELECT v FROM src), datetime('now'))",
    ];
    for (const sql of sqls) {
      // Values of the clock's window, a moment before the statement reads the clock.
      t.meanwhile(`UPDATE src SET v = ${Date.now() - 1}`);
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      t.meanwhile(`UPDATE src SET v = ${Date.now() - 1}`);
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
    }
    // A CREATE TABLE … AS SELECT has no trigger to read the instant: a time of the moments it ran.
    const ctas = 'CREATE TABLE c AS SELECT CURRENT_TIMESTAMP AS at, v FROM src';
    t.meanwhile(`UPDATE src SET v = ${Date.now() - 50}`);
    const fx = previewEffect(t.db, ctas, [], LIMITS, FX);
    t.meanwhile(`UPDATE src SET v = ${Date.now() - 50}`);
    expect(t.approvedRun(ctas, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('asks again when the clock would write the time in another form than the person was shown', () => {
    const sqls = [
      'UPDATE t SET n = CASE (SELECT f FROM flag) WHEN 0 THEN CURRENT_TIMESTAMP ELSE unixepoch() END WHERE id = 1',
      "CREATE TABLE c AS SELECT CASE (SELECT f FROM flag) WHEN 0 THEN CURRENT_TIMESTAMP ELSE unixepoch('now') END AS n",
    ];
    for (const sql of sqls) {
      t.meanwhile('UPDATE flag SET f = 0');
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.rows[0]!.after!.n, sql).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      t.meanwhile('UPDATE flag SET f = 1');
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
    }
  });

  it('runs a statement whose clock values are the instant it ran at, a second later, in every form SQLite writes', () => {
    const sqls = [
      `UPDATE t SET at = CURRENT_TIMESTAMP, n = CASE WHEN id > 0 THEN unixepoch() END WHERE id = 1`,
      `UPDATE t SET n = CASE WHEN id > 0 THEN CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) END WHERE id = 1`,
      `UPDATE t SET n = CASE WHEN id > 0 THEN CAST(unixepoch('subsec') * 1000 AS INTEGER) END WHERE id = 1`,
      `UPDATE t SET n = CASE WHEN id > 0 THEN unixepoch('subsec') END, at = datetime('now', 'subsec') WHERE id = 1`,
      `UPDATE t SET n = CASE WHEN id > 0 THEN julianday('now') END, at = date('now') WHERE id = 1`,
      `UPDATE t SET n = CASE WHEN id > 0 THEN time('now') END, at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = 1`,
      `UPDATE t SET n = CASE WHEN id > 0 THEN strftime('%s', 'now') + 0 END WHERE id = 1`,
      'INSERT INTO t (id, n) VALUES (5, CASE WHEN 1 THEN CURRENT_TIMESTAMP END)',
      'CREATE TABLE c AS SELECT CASE WHEN 1 THEN CURRENT_TIMESTAMP END AS n, unixepoch() + 0 AS s',
    ];
    const reset = 'DROP TABLE IF EXISTS c; DELETE FROM t WHERE id > 1; UPDATE t SET n = 0, at = NULL';
    t.db.exec(reset);
    const previewed = sqls.map((sql) => previewEffect(t.db, sql, [], LIMITS, FX));
    nextSecond(Date.now());
    sqls.forEach((sql, i) => {
      expect(t.approvedRun(sql, previewed[i]!.digest), sql).toMatchObject({ changes: expect.any(Number) });
      t.db.exec(reset);
    });
  });
});
