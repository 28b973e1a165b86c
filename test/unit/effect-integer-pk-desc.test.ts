/**
 * `id INTEGER PRIMARY KEY DESC` is not the rowid (SQLite's documented quirk: only without DESC, or
 * as a table constraint, is an INTEGER PRIMARY KEY the rowid's alias). The effect recorder took it
 * for the alias, so an insert not naming it had its value left out of the digest as "assigned by
 * SQLite", where SQLite gives it the column's DEFAULT: any text the table's maker chose. Made
 * again between the approval and the run with another DEFAULT, the table took that text, unseen
 * (session 35, R9).
 */
import { describe, expect, it } from 'vitest';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';

describe('an INTEGER PRIMARY KEY DESC column is bound as the ordinary column it is', () => {
  const t = effectDatabase('agentdb-effect-pk-desc-', "CREATE TABLE d (id INTEGER PRIMARY KEY DESC DEFAULT 'shown', b TEXT)");
  const insert = "INSERT INTO d (b) VALUES ('x')";

  it('asks again when the table is made again with another DEFAULT for it', () => {
    const fx = previewEffect(t.db, insert, [], LIMITS, FX);
    expect(fx.rows[0]!.after).toEqual({ id: 'shown', b: 'x' });
    t.meanwhile('ALTER TABLE d RENAME TO d_before', "CREATE TABLE d (id INTEGER PRIMARY KEY DESC DEFAULT 'not shown', b TEXT)");
    expect(t.approvedRun(insert, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(t.db.prepare('SELECT count(*) FROM d').pluck().get()).toBe(0);
  });

  it('runs when only the rowid SQLite assigns differs, and still leaves out a real alias', () => {
    const fx = previewEffect(t.db, insert, [], LIMITS, FX);
    t.meanwhile("INSERT INTO d (id, b) VALUES ('k', 'other')");
    expect(t.approvedRun(insert, fx.digest)).toMatchObject({ changes: 1 });
    expect(t.db.prepare("SELECT rowid, id, b FROM d WHERE b = 'x'").get()).toEqual({ rowid: 2, id: 'shown', b: 'x' });

    // As a table constraint, DESC or not, an INTEGER PRIMARY KEY is the rowid's alias: assigned.
    t.meanwhile('CREATE TABLE a (id INTEGER, b TEXT, PRIMARY KEY (id DESC))');
    const alias = "INSERT INTO a (b) VALUES ('x')";
    const seen = previewEffect(t.db, alias, [], LIMITS, FX);
    t.meanwhile("INSERT INTO a (b) VALUES ('meanwhile')");
    expect(t.approvedRun(alias, seen.digest)).toMatchObject({ changes: 1 });
  });
});
