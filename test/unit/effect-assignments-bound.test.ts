/**
 * Values an approved insert copied from data while the digest left them out as random (session
 * 35, R9). The digest leaves out a column the statement sets to only the clock and randomness; it
 * read that off every SET and every VALUES of the statement at once, so
 *
 * - an upsert's `DO UPDATE SET a = random()` left out the `a` its rows insert, which VALUES
 *   without a column list (or a list without `a`) gives from data or a DEFAULT;
 * - `VALUES (random()) UNION ALL SELECT v FROM src` left out the rows the SELECT arm copies;
 * - `VALUES (NULL, …) UNION ALL SELECT k, …` left out the key the SELECT arm gives, as one SQLite
 *   assigns.
 *
 * - `UPDATE t SET id = 100, parent = 1` left out `parent` in every row of t it updated, also the
 *   rows t's own `ON UPDATE SET DEFAULT` action wrote: the DEFAULT, which a table made again
 *   meanwhile chose.
 *
 * - `VALUES ('007')` under a column list was left out as if made as it ran: a constant, but what
 *   it stores is the column's affinity's to decide, and a table made again meanwhile with an
 *   INTEGER column stored 7.
 *
 * Each committed another value than the one the person was shown.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe("an insert's values are bound unless its own VALUES make them", () => {
  const t = effectDatabase(
    'agentdb-effect-upsert-compound-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT);
     CREATE TABLE src (k INTEGER, v TEXT);
     INSERT INTO src VALUES (7, 'shown');`,
  );

  it('asks again when the data an upsert or a compound source inserts changed after the approval', () => {
    for (const sql of [
      'INSERT INTO t VALUES (1, (SELECT v FROM src)) ON CONFLICT (id) DO UPDATE SET a = random()',
      'INSERT INTO t SELECT 1, v FROM src WHERE true ON CONFLICT (id) DO UPDATE SET a = CURRENT_TIMESTAMP',
      'INSERT INTO t (a) VALUES (random()) UNION ALL SELECT v FROM src',
      'WITH s AS (SELECT v FROM src) INSERT INTO t (a) VALUES (random()), (random()) UNION SELECT v FROM s',
    ]) {
      t.meanwhile('DELETE FROM t', "UPDATE src SET v = 'shown'");
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.rows.map((r) => r.after!.a)).toContain('shown');
      t.meanwhile("UPDATE src SET v = 'not shown'");
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(t.db.prepare('SELECT count(*) FROM t').pluck().get(), sql).toBe(0);
    }
    // The key the SELECT arm gives is no rowid SQLite assigns.
    const keyed = "INSERT INTO t VALUES (NULL, 'x') UNION ALL SELECT k, 'y' FROM src";
    const fx = previewEffect(t.db, keyed, [], LIMITS, FX);
    t.meanwhile('UPDATE src SET k = 8');
    expect(t.approvedRun(keyed, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('runs an upsert whose random values, inserted and updated, differ from the preview', () => {
    t.meanwhile("INSERT INTO t VALUES (1, 'old')");
    const sql = 'INSERT INTO t (id, a) VALUES (1, random()), (2, random()) ON CONFLICT (id) DO UPDATE SET a = random()';
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(fx.tables).toEqual([{ table: 't', inserted: 1, updated: 1, deleted: 0 }]);
    expect(t.approvedRun(sql, fx.digest)).toMatchObject({ changes: 2 });
  });
});

describe("a column the statement sets is bound where its table's own foreign-key action writes it", () => {
  const t = effectDatabase(
    'agentdb-effect-fk-action-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, parent INTEGER DEFAULT 1 REFERENCES t(id) ON UPDATE SET DEFAULT, note TEXT);
     INSERT INTO t VALUES (1, NULL, 'one'), (2, NULL, 'two'), (5, NULL, 'five'), (6, 5, 'child');`,
  );

  it('asks again when the action would write another DEFAULT than the one shown', () => {
    const sql = 'UPDATE t SET id = 100, parent = 1 WHERE id = 5';
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(fx.rows.find((r) => r.before?.id === 6)?.after).toMatchObject({ parent: 1 });
    t.meanwhile(
      'ALTER TABLE t RENAME TO t_before',
      'CREATE TABLE t (id INTEGER PRIMARY KEY, parent INTEGER DEFAULT 2 REFERENCES t(id) ON UPDATE SET DEFAULT, note TEXT)',
      'INSERT INTO t SELECT * FROM t_before',
    );
    expect(t.approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(t.db.prepare('SELECT parent FROM t WHERE id = 6').pluck().get()).toBe(5);
  });
});

describe("a constant the statement writes is bound: what it stores is the column affinity's", () => {
  const t = effectDatabase(
    'agentdb-effect-constant-',
    "CREATE TABLE z0 (id INTEGER PRIMARY KEY, code TEXT); CREATE TABLE z1 (id INTEGER PRIMARY KEY, code TEXT); INSERT INTO z1 (code) VALUES ('x');",
  );

  it('asks again when the column would store another type of it', () => {
    for (const [i, sql] of ["INSERT INTO z0 (code) VALUES ('007')", "UPDATE z1 SET code = '1e3'"].entries()) {
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.rows[0]!.after).toMatchObject({ code: i === 0 ? '007' : '1e3' });
      t.meanwhile(
        `ALTER TABLE z${i} RENAME TO z${i}_before`,
        `CREATE TABLE z${i} (id INTEGER PRIMARY KEY, code INTEGER)`,
        `INSERT INTO z${i} SELECT * FROM z${i}_before`,
      );
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
    }
  });
});
