/**
 * Recording a write's effect in a database that holds a wide table (session 34, R8). The recorder
 * logged each table's changes in one temporary table of 3 + keys + 2 × columns columns, and
 * SQLite allows 2,000: one table of 999 columns anywhere in a database made every preview and
 * every approved run there fail with "too many columns on _agentdb_fx_1", so no write to any of
 * its tables could be shown to a person, and none approved could commit.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

const FX = { maxRows: 100, maxBytes: 1_000_000 };
const columns = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`).join(', ');

describe('an approved write in a database with a wide table', () => {
  const t = effectDatabase(
    'agentdb-effect-wide-',
    `CREATE TABLE wide (${columns(2000)}); INSERT INTO wide (c0, c1999) VALUES (1, 2); CREATE TABLE t (a TEXT)`,
    FX,
  );
  const { approvedRun } = t;

  it('previews and runs a write to another table', () => {
    const sql = "INSERT INTO t VALUES ('x')";
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(fx.rows).toEqual([{ table: 't', op: 'insert', key: { rowid: 1 }, before: null, after: { a: 'x' }, madeAtRun: ['rowid'] }]);
    expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
  });

  it('shows and binds every column of the wide table, its first and last, and a moved rowid', () => {
    const sql = 'UPDATE wide SET c1999 = 7, rowid = 40';
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(fx.rows[0]).toMatchObject({
      op: 'update',
      key: { rowid: 1 },
      before: { c0: 1, c1998: null, c1999: 2, rowid: 1 },
      after: { c0: 1, c1999: 7, rowid: 40 },
    });
    expect(Object.keys(fx.rows[0]!.after!)).toHaveLength(2001);
    t.db.exec("UPDATE wide SET c1998 = 'changed after the approval'");
    expect(approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    const again = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(approvedRun(sql, again.digest)).toMatchObject({ changes: 1 });
    expect(t.db.prepare('SELECT rowid, c0, c1998, c1999 FROM wide').raw().all()).toEqual([[40, 1, 'changed after the approval', 7]]);
    expect(t.db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get()).toBe(0);
  });

  it('records a WITHOUT ROWID table whose key is wide too', () => {
    t.db.exec(`CREATE TABLE wk (${columns(1500)}, PRIMARY KEY (${columns(1200)})) WITHOUT ROWID;
      INSERT INTO wk (${columns(1200)}) VALUES (${Array.from({ length: 1200 }, (_, i) => i).join(', ')})`);
    const sql = 'UPDATE wk SET c1499 = 9, c0 = 5';
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(fx.rows[0]).toMatchObject({ op: 'update', key: { c0: 0, c1199: 1199 }, before: { c0: 0, c1499: null }, after: { c0: 5, c1499: 9 } });
    t.db.exec("UPDATE wk SET c1300 = 'changed after the approval'");
    expect(approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(approvedRun(sql, previewEffect(t.db, sql, [], LIMITS, FX).digest)).toMatchObject({ changes: 1 });
  });
});
