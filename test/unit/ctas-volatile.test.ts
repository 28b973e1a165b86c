/**
 * An approved CREATE TABLE … AS SELECT whose select list makes values of the clock or randomness
 * (session 32, R6). R5 bound a CTAS to the rows it makes; `random()` makes new rows at every run,
 * so such a CTAS was asked again each time it was approved and could never run. Its result
 * columns of only the clock and randomness are left out of the digest as a write's SET of them is
 * (effect-volatile.ts); what the SELECT reads stays bound.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('an approved CREATE TABLE … AS SELECT of random or clock columns', () => {
  const t = effectDatabase('agentdb-ctas-volatile-', `CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT); INSERT INTO t VALUES (1, 'one'), (2, 'two');`);
  const { approvedRun } = t;
  const made = (name: string) => t.db.prepare('SELECT count(*) FROM sqlite_schema WHERE name = ?').pluck().get(name);

  it('runs when only its random and clock columns differ from the preview', () => {
    for (const sql of [
      'CREATE TABLE tok AS SELECT a, b, lower(hex(randomblob(8))) AS token, random() r FROM t',
      "CREATE TABLE mix AS SELECT b, random() AS r, CURRENT_TIMESTAMP FROM t UNION ALL SELECT 'extra', randomblob(4), datetime('now')",
    ]) {
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.rows.length).toBeGreaterThan(1);
      expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 0 });
    }
    expect(t.db.prepare('SELECT count(*) FROM tok').pluck().get()).toBe(2);
    expect(t.db.prepare('SELECT count(*) FROM mix').pluck().get()).toBe(3);
  });

  it('asks again when a row its SELECT reads changed, or when randomness chose what it copies', () => {
    const sql = 'CREATE TABLE tok AS SELECT a, b, random() AS r FROM t';
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    t.db.exec("UPDATE t SET b = 'changed after approval' WHERE a = 1");
    expect(approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(made('tok')).toBe(0);
    // A column of data and randomness together is bound (only a bare clock or random expression is not).
    const chosen = 'CREATE TABLE pick AS SELECT a, random() + a AS r FROM t';
    const seen = previewEffect(t.db, chosen, [], LIMITS, FX);
    expect(approvedRun(chosen, seen.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(made('pick')).toBe(0);
  });

  // Session 33, R7: R6's rule read only the CTAS's own select list, so a random value read through
  // a CTE or a subquery was bound, and such a CTAS was asked again at every approval.
  it('runs when its random and clock values come through a CTE or a subquery', () => {
    t.db.exec('CREATE TABLE r (x TEXT)');
    const made: [string, number][] = [
      ['CREATE TABLE c1 AS WITH r AS (SELECT random() x) SELECT x FROM r', 1],
      ['CREATE TABLE c2 AS SELECT * FROM (SELECT randomblob(4))', 1],
      ['CREATE TABLE c3 AS WITH r(y) AS (SELECT random()) SELECT a, b, y, CURRENT_TIMESTAMP AS at FROM t JOIN r ON 1', 2],
      ['CREATE TABLE c4 AS WITH s AS (SELECT random() z), r AS (SELECT z AS y FROM s) SELECT q.*, y FROM (SELECT a, hex(randomblob(2)) AS k FROM t) q, r', 2],
      ["CREATE TABLE c5 AS WITH r AS (SELECT random() x) SELECT x FROM r UNION ALL VALUES (randomblob(2)), (datetime('now'))", 3],
    ];
    for (const [sql, rows] of made) {
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.tables[0]?.inserted, sql).toBe(rows);
      expect(approvedRun(sql, fx.digest), sql).toMatchObject({ changes: 0 });
    }
  });

  it('asks again when a VALUES arm copies data, or a name the CTE makes random is read from a table', () => {
    t.db.exec(`CREATE TABLE r (x TEXT); INSERT INTO r VALUES ('seen')`);
    for (const sql of [
      // On main the VALUES arm was not counted as an arm: its copy of t.b was left out of the digest and committed.
      'CREATE TABLE v1 AS SELECT random() UNION ALL VALUES ((SELECT b FROM t WHERE a = 1))',
      'CREATE TABLE v2 AS VALUES ((SELECT b FROM t WHERE a = 1)) UNION ALL SELECT random()',
      // main.r is the table, not the CTE; and a subquery aliased r hides the CTE.
      'CREATE TABLE v3 AS WITH r AS (SELECT random() x) SELECT x FROM main.r UNION ALL SELECT b FROM t WHERE a = 1',
      'CREATE TABLE v4 AS WITH r AS (SELECT random() x) SELECT x FROM (SELECT b AS x FROM t WHERE a = 1) AS r',
    ]) {
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      t.db.exec("UPDATE t SET b = 'changed after approval' WHERE a = 1");
      expect(approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(made(sql.split(' ')[2]!), sql).toBe(0);
      t.db.exec("UPDATE t SET b = 'one' WHERE a = 1");
    }
  });
});
