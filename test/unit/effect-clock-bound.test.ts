/**
 * A written value that reads as a time of the recording's clock is left out of the digest (the
 * person could not be shown it exactly). That held for every value, so an INTEGER copied from
 * another table that reads as unix milliseconds of the window was left out too, though no clock
 * made it: its value could be chosen among the window's thousands of milliseconds (session 34,
 * R8's leftover). Now only a statement whose program calls a date or time function (views and
 * DEFAULTs compiled in) has such values left out (session 35, R9).
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { clockWrites } from '../../src/sqlite/effect-clock.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('a value that reads as a time is left out only where the clock can write it', () => {
  const t = effectDatabase(
    'agentdb-effect-clock-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, at TEXT DEFAULT CURRENT_TIMESTAMP);
     INSERT INTO t (id, n) VALUES (1, 0);
     CREATE TABLE src (v INTEGER);
     INSERT INTO src VALUES (0);
     CREATE VIEW now_v AS SELECT unixepoch('now') AS s;`,
  );

  it('asks again when a copied number that reads as now changed after the approval', () => {
    for (const sql of ['UPDATE t SET n = (SELECT v FROM src) WHERE id = 1', 'CREATE TABLE c AS SELECT v FROM src']) {
      const ms = Date.now();
      t.meanwhile(`UPDATE src SET v = ${ms}`);
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      t.meanwhile(`UPDATE src SET v = ${ms + 1}`);
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
    }
  });

  it('knows the statements that can write the clock: its own functions, a DEFAULT it leaves or an action writes, a view it reads', () => {
    const db = t.db;
    expect(clockWrites(db, 'UPDATE t SET n = (SELECT v FROM src)')).toBe(false);
    expect(clockWrites(db, 'INSERT INTO t (id, n, at) VALUES (2, ?, ?)')).toBe(false);
    expect(clockWrites(db, "UPDATE t SET at = datetime('now')")).toBe(true);
    expect(clockWrites(db, 'UPDATE t SET n = unixepoch(?)')).toBe(true);
    expect(clockWrites(db, 'INSERT INTO t (id, n) VALUES (2, 1)')).toBe(true);
    expect(clockWrites(db, 'INSERT INTO t (id, n) SELECT 3, s FROM now_v')).toBe(true);
    // A foreign-key action's SET DEFAULT may write a clock DEFAULT: its subprogram is listed too.
    expect(clockWrites(db, 'DELETE FROM t WHERE id = 1')).toBe(false);
    db.exec('CREATE TABLE k (pid INTEGER DEFAULT (unixepoch()) REFERENCES t(id) ON DELETE SET DEFAULT)');
    expect(clockWrites(db, 'DELETE FROM t WHERE id = 1')).toBe(true);
  });
});
