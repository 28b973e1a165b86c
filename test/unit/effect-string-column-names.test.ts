/**
 * A column named by a string literal in a SET list or an INSERT's column list (session 37, R11).
 * SQLite's grammar takes a string there as a name (`nm` in parse.y): `SET a = random(), 'a' = …`
 * sets `a` twice, and an UPDATE writes the rightmost, an INSERT the first. The digest's reader of
 * random assignments saw no name in the string: `a` counted as set only by `random()` and was left
 * out of the digest, so the copy the person was shown changed meanwhile and committed.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('a column named by a string literal is the column', () => {
  const t = effectDatabase(
    'agentdb-effect-string-column-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT);
     INSERT INTO t VALUES (1, 'before');
     CREATE TABLE src (v TEXT);
     INSERT INTO src VALUES ('shown');`,
  );

  it('asks again when the value a string-named assignment copies changed after the approval', () => {
    for (const sql of [
      "UPDATE t SET a = random(), 'a' = (SELECT v FROM src)",
      "UPDATE t SET a = random(), ('a') = (SELECT v FROM src)",
      "UPDATE t SET a = CURRENT_TIMESTAMP, 'A' = (SELECT v FROM src) WHERE id = 1",
      "INSERT INTO t ('a', a) VALUES ((SELECT v FROM src), random())",
    ]) {
      t.meanwhile("UPDATE src SET v = 'shown'");
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(
        fx.rows.map((r) => r.after!.a),
        sql,
      ).toEqual(['shown']);
      t.meanwhile("UPDATE src SET v = 'not shown'");
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(t.db.prepare("SELECT count(*) FROM t WHERE a = 'not shown'").pluck().get(), sql).toBe(0);
    }
  });

  it('still leaves out a random value set through a string-named column', () => {
    const sql = "UPDATE t SET 'a' = hex(randomblob(8)) WHERE id = 1";
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    expect(t.approvedRun(sql, fx.digest)).toMatchObject({ changes: 1 });
  });
});
