/**
 * An approved write of values that read alike but are not the same (session 34, R8). SQLite keeps
 * a text's bytes as given (`CAST(x'FF41' AS TEXT)`); read back, each byte that is not UTF-8
 * becomes U+FFFD, so the effect of writing bytes FF 41 and the one of writing FE 41 read alike,
 * "�A", and had one digest: approved with the first, the run committed the second. So did an
 * INTEGER past 2^53 and the TEXT of its digits (both JSON strings), and REAL 1.0 and INTEGER 1.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('an approved write is bound to the bytes of the text it writes and overwrites', () => {
  const t = effectDatabase(
    'agentdb-effect-text-',
    "CREATE TABLE t (k TEXT PRIMARY KEY, a TEXT) WITHOUT ROWID; INSERT INTO t VALUES ('x', 'plain'); CREATE TABLE src (v BLOB); INSERT INTO src VALUES (x'FF41')",
  );
  const { approvedRun } = t;
  const hexes = () => t.db.prepare('SELECT hex(k), hex(a) FROM t ORDER BY k').raw().all();

  it('asks again when the bytes it would write, overwrite or key by changed, though they read alike', () => {
    const statements = [
      "UPDATE t SET a = CAST((SELECT v FROM src) AS TEXT) WHERE k = 'x'",
      "INSERT INTO t SELECT CAST(v AS TEXT), 'new' FROM src",
      'CREATE TABLE copied AS SELECT CAST(v AS TEXT) AS v FROM src',
    ];
    for (const sql of statements) {
      t.db.exec("UPDATE src SET v = x'FF41'");
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(JSON.stringify(fx.rows), sql).toContain('\uFFFDA');
      t.db.exec("UPDATE src SET v = x'FE41'");
      expect(approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(hexes()).toEqual([['78', '706C61696E']]);
      expect(t.db.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'copied'").pluck().get()).toBe(0);
    }
    t.db.exec("UPDATE t SET a = CAST(x'FF41' AS TEXT)");
    const overwrite = "UPDATE t SET a = 'clean' WHERE k = 'x'";
    const fx = previewEffect(t.db, overwrite, [], LIMITS, FX);
    t.db.exec("UPDATE t SET a = CAST(x'FE41' AS TEXT)");
    expect(approvedRun(overwrite, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('runs when the bytes are the ones previewed, and binds a real U+FFFD as before', () => {
    const sql = "UPDATE t SET a = CAST((SELECT v FROM src) AS TEXT) WHERE k = 'x'";
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
    expect(hexes()).toEqual([['78', 'FF41']]);
    const replacement = "UPDATE t SET a = 'a \uFFFD b' WHERE k = 'x'";
    const seen = previewEffect(t.db, replacement, [], LIMITS, FX);
    expect(approvedRun(replacement, seen.digest)).toMatchObject({ changes: 1 });
  });

  it('asks again when an INTEGER past 2^53 became the text of its digits, or an INTEGER a whole REAL', () => {
    t.db.exec('CREATE TABLE n (v); INSERT INTO n VALUES (NULL); CREATE TABLE s2 (v); INSERT INTO s2 VALUES (9007199254740993)');
    for (const [first, then] of [
      ['9007199254740993', "'9007199254740993'"],
      ['1', '1.0'],
    ]) {
      t.db.exec(`UPDATE s2 SET v = ${first}`);
      const sql = 'UPDATE n SET v = (SELECT v FROM s2)';
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      t.db.exec(`UPDATE s2 SET v = ${then}`);
      expect(approvedRun(sql, fx.digest), then).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(t.db.prepare('SELECT typeof(v) FROM n').pluck().get()).toBe('null');
      expect(approvedRun(sql, previewEffect(t.db, sql, [], LIMITS, FX).digest), then).toMatchObject({ changes: 1 });
      t.db.exec('UPDATE n SET v = NULL');
    }
  });
});
