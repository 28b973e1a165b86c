/**
 * An approved UPDATE that moves a row's rowid (session 34, R8). A rowid table without an INTEGER
 * PRIMARY KEY holds its rowid in no column, and the effect recorded each update's columns before
 * and after, keyed by the old rowid: `UPDATE t SET rowid = (SELECT v FROM src)` was shown as an
 * update that changed nothing, and the run committed whatever rowid `src` held by then.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('an approved update is bound to the rowid it moves a row to', () => {
  const t = effectDatabase(
    'agentdb-effect-rowid-',
    "CREATE TABLE t (a TEXT, b TEXT); INSERT INTO t VALUES ('x', 'one'), ('y', 'two'); CREATE TABLE src (v INTEGER); INSERT INTO src VALUES (100)",
  );
  const { approvedRun } = t;
  const rowids = () => t.db.prepare('SELECT rowid, a FROM t ORDER BY rowid').raw().all();

  it('shows the move, and asks again when the rowid it would move to changed', () => {
    for (const sql of [
      "UPDATE t SET rowid = (SELECT v FROM src) WHERE a = 'x'",
      "INSERT INTO t (rowid, a, b) VALUES (1, 'x', 'one') ON CONFLICT (rowid) DO UPDATE SET oid = (SELECT v FROM src)",
    ]) {
      t.db.exec('UPDATE src SET v = 100');
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(fx.rows, sql).toEqual([
        { table: 't', op: 'update', key: { rowid: 1 }, before: { a: 'x', b: 'one', rowid: 1 }, after: { a: 'x', b: 'one', rowid: 100 } },
      ]);
      t.db.exec('UPDATE src SET v = 999');
      expect(approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(rowids()).toEqual([
        [1, 'x'],
        [2, 'y'],
      ]);
    }
  });

  it('runs when it moves the row where the person saw it moved, and an update that moves nothing keeps its digest', () => {
    const sql = "UPDATE t SET rowid = (SELECT v FROM src) WHERE a = 'x'";
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
    expect(rowids()).toEqual([
      [2, 'y'],
      [100, 'x'],
    ]);
    const plain = "UPDATE t SET b = 'three' WHERE a = 'y'";
    const seen = previewEffect(t.db, plain, [], LIMITS, FX);
    expect(seen.rows[0]!.after).toEqual({ a: 'y', b: 'three' });
    expect(approvedRun(plain, seen.digest)).toMatchObject({ changes: 1 });
  });
});
