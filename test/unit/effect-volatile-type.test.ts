/**
 * A value left out of the digest as made by the clock or randomness is still bound to the storage
 * class it was stored as (session 37, R11). What the clock or randomness makes is not known in
 * advance, but what the column's affinity makes of it is: left out whole, `SET code =
 * strftime('007', 'now')` (a constant in a clock's guise, which R9 bound when written `'007'`)
 * was shown as the text '007' and committed the INTEGER 7 once the table was made again meanwhile
 * with `code INTEGER`; `random()` shown as an INTEGER committed text.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('a value made as the write runs is bound to its type', () => {
  const t = effectDatabase(
    'agentdb-effect-volatile-type-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, code TEXT, n INTEGER); INSERT INTO t VALUES (1, NULL, NULL);`,
  );
  let remade = 0;
  /** Another caller makes t again, its rows as they were, with `columns` in place of its own. */
  const remake = (columns: string) =>
    t.meanwhile(`ALTER TABLE t RENAME TO t_${remade}`, `CREATE TABLE t (${columns})`, `INSERT INTO t (id) SELECT id FROM t_${remade++}`);

  it('asks again when a table made again meanwhile would store it as another type', () => {
    for (const [sql, column, shown] of [
      ["UPDATE t SET code = strftime('007', 'now') WHERE id = 1", 'code', '007'],
      ["INSERT INTO t (id, code) VALUES (2, strftime('1e3', 'now'))", 'code', '1e3'],
      ["UPDATE t SET code = strftime('%H%M%S', 'now') WHERE id = 1", 'code', undefined],
      ['UPDATE t SET n = random() WHERE id = 1', 'n', undefined],
    ] as const) {
      remake('id INTEGER PRIMARY KEY, code TEXT, n INTEGER');
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      const value = fx.rows[0]!.after![column];
      if (shown !== undefined) expect(value, sql).toBe(shown);
      remake('id INTEGER PRIMARY KEY, code INTEGER, n TEXT');
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ code: 'APPROVAL_STALE' });
      expect(t.db.prepare(`SELECT count(*) FROM t WHERE ${column} IS NOT NULL`).pluck().get(), sql).toBe(0);
    }
  });

  it("asks again when a volatile DEFAULT's column would store it as another type", () => {
    remake('id INTEGER PRIMARY KEY, code TEXT, n INTEGER DEFAULT (random())');
    const sql = "INSERT INTO t (id, code) VALUES (2, 'x')";
    const fx = previewEffect(t.db, sql, [], LIMITS, FX);
    remake('id INTEGER PRIMARY KEY, code TEXT, n TEXT DEFAULT (random())');
    expect(t.approvedRun(sql, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
  });

  it('runs the clock and randomness it left out when the table is as it was', () => {
    remake('id INTEGER PRIMARY KEY, code TEXT, n INTEGER, b BLOB DEFAULT (randomblob(8)), at TEXT DEFAULT CURRENT_TIMESTAMP');
    for (const sql of [
      'UPDATE t SET code = hex(randomblob(8)), n = random(), b = randomblob(4) WHERE id = 1',
      'INSERT INTO t (code, n) VALUES (lower(hex(randomblob(16))), random())',
      'UPDATE t SET n = unixepoch(), at = CURRENT_TIMESTAMP WHERE id = 1',
    ]) {
      const fx = previewEffect(t.db, sql, [], LIMITS, FX);
      expect(t.approvedRun(sql, fx.digest), sql).toMatchObject({ changes: 1 });
    }
  });
});
