/**
 * Two ways an approved write committed a value the person was not shown (session 35, R9).
 *
 * - The digest leaves out a column the statement sets to only the clock or randomness
 *   (`SET k = random()`), matching columns by name. It matched with JavaScript's toLowerCase,
 *   which folds the Kelvin sign (U+212A) to `k`; SQLite folds ASCII only, so a column "K" (Kelvin)
 *   is another column, and its value, set from another table's data, was left out too.
 * - A REAL infinity (`9e999`) is `null` in JSON: shown as NULL, and bound as NULL, so a write
 *   previewed as setting a cell to NULL committed +Inf or -Inf.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

const KELVIN = '\u212A';

describe('a column named like a randomly set one, but for Unicode case, is bound', () => {
  const t = effectDatabase(
    'agentdb-effect-kelvin-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, "${KELVIN}" TEXT);
     INSERT INTO t VALUES (1, 'a', 'b');
     CREATE TABLE src (v TEXT);
     INSERT INTO src VALUES ('shown');`,
  );

  it('asks again when the value copied into the Kelvin column changed after the approval', () => {
    for (const sql of [
      `UPDATE t SET k = random(), "${KELVIN}" = (SELECT v FROM src) WHERE id = 1`,
      `INSERT INTO t (id, k, "${KELVIN}") VALUES (2, random(), (SELECT v FROM src))`,
    ]) {
      t.meanwhile("UPDATE src SET v = 'shown'");
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.rows[0]!.after).toMatchObject({ [KELVIN]: 'shown' });
      t.meanwhile("UPDATE src SET v = 'not shown'");
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(t.db.prepare(`SELECT count(*) FROM t WHERE "${KELVIN}" = 'not shown'`).pluck().get()).toBe(0);
    }
  });

  it('still leaves out the random value of the ASCII column', () => {
    const sql = `UPDATE t SET k = random(), "${KELVIN}" = (SELECT v FROM src) WHERE id = 1`;
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(t.approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
    expect(t.db.prepare(`SELECT "${KELVIN}" FROM t`).pluck().get()).toBe('shown');
  });
});

describe('a REAL infinity is shown and bound as itself', () => {
  const t = effectDatabase(
    'agentdb-effect-infinity-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, k);
     INSERT INTO t VALUES (1, 'a');
     CREATE TABLE src (v);
     INSERT INTO src VALUES (NULL);`,
  );
  const copy = 'UPDATE t SET k = (SELECT v FROM src) WHERE id = 1';

  it('asks again when the NULL it was shown writing became an infinity', () => {
    for (const inf of ['9e999', '-9e999']) {
      t.meanwhile('UPDATE src SET v = NULL');
      const fx = previewEffect(t.db, copy, [], LIMITS, FX);
      expect(fx.rows[0]!.after).toEqual({ id: 1, k: null });
      t.meanwhile(`UPDATE src SET v = ${inf}`);
      expect(t.approvedRun(copy, fx.digest), inf).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(t.db.prepare('SELECT typeof(k) FROM t').pluck().get()).toBe('text');
    }
  });

  it('shows an infinity it writes or overwrites, and keeps +Inf, -Inf and the text apart', () => {
    const fx = previewEffect(t.db, 'UPDATE t SET k = -9e999 WHERE id = 1', [], LIMITS, FX);
    expect(fx.rows[0]!.after).toEqual({ id: 1, k: '-Infinity' });
    t.meanwhile('UPDATE src SET v = 9e999');
    const seen = previewEffect(t.db, copy, [], LIMITS, FX);
    expect(seen.rows[0]!.after).toEqual({ id: 1, k: 'Infinity' });
    t.meanwhile("UPDATE src SET v = 'Infinity'");
    expect(t.approvedRun(copy, seen.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    t.meanwhile('UPDATE src SET v = 9e999');
    expect(t.approvedRun(copy, seen.digest)).toMatchObject({ changes: 1 });
    const over = 'UPDATE t SET k = 0 WHERE id = 1';
    const shown = previewEffect(t.db, over, [], LIMITS, FX);
    expect(shown.rows[0]!.before).toEqual({ id: 1, k: 'Infinity' });
    t.meanwhile('UPDATE t SET k = -9e999 WHERE id = 1');
    expect(t.approvedRun(over, shown.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('binds an infinity a CREATE TABLE … AS SELECT copies', () => {
    const ctas = 'CREATE TABLE c AS SELECT v FROM src';
    t.meanwhile('UPDATE src SET v = NULL');
    const fx = previewEffect(t.db, ctas, [], LIMITS, FX);
    t.meanwhile('UPDATE src SET v = 9e999');
    expect(t.approvedRun(ctas, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });
});
