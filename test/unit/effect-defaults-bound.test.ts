/**
 * An approved insert whose values a DEFAULT makes (session 34, R8). The digest leaves out a value
 * that a volatile DEFAULT (`CURRENT_TIMESTAMP`, `randomblob()`) or SQLite's rowid makes, since
 * nobody could be shown it exactly; it did not bind which DEFAULT made it. So a table made again
 * between the approval and the run, same columns, with `DEFAULT (strftime('any text', 'now'))`,
 * had the approved insert write that text where the person was shown a time.
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('an approved insert is bound to the DEFAULTs that make its left-out values', () => {
  const t = effectDatabase('agentdb-effect-defaults-', undefined);
  const { approvedRun, meanwhile } = t;

  it('asks again when the table is made again with a DEFAULT or a key that makes something else', () => {
    meanwhile('CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP)');
    const insert = "INSERT INTO t (a) VALUES ('x')";
    const fx = previewEffect(t.db, insert, [], LIMITS, FX);
    expect(fx.rows[0]!.after).toMatchObject({ a: 'x', at: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/) });
    meanwhile(
      'ALTER TABLE t RENAME TO t_before',
      "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT (strftime('not what you approved', 'now')))",
    );
    expect(approvedRun(insert, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(t.db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(0);

    // The rowid SQLite assigns is left out too: a key the table makes by a DEFAULT instead is not that.
    meanwhile('CREATE TABLE k (id INTEGER PRIMARY KEY, a TEXT)');
    const keyed = "INSERT INTO k (a) VALUES ('x')";
    const seen = previewEffect(t.db, keyed, [], LIMITS, FX);
    meanwhile('ALTER TABLE k RENAME TO k_before', 'CREATE TABLE k (id TEXT PRIMARY KEY DEFAULT (hex(randomblob(2))), a TEXT) WITHOUT ROWID');
    expect(approvedRun(keyed, seen.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(t.db.prepare('SELECT count(*) FROM k').pluck().get()).toBe(0);
  });

  it('runs when the table is made again with the same DEFAULT', () => {
    meanwhile('CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP, tok BLOB DEFAULT (randomblob(4)))');
    const insert = "INSERT INTO t (a) VALUES ('x')";
    const fx = previewEffect(t.db, insert, [], LIMITS, FX);
    meanwhile(
      'ALTER TABLE t RENAME TO t_before',
      'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP, tok BLOB DEFAULT (randomblob(4)))',
    );
    expect(approvedRun(insert, fx.digest)).toMatchObject({ changes: 1 });
    expect(t.db.prepare('SELECT a FROM t').pluck().all()).toEqual(['x']);
  });
});
