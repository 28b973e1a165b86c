/**
 * The write check compares the schema before and after a write, and computes "before" again only
 * when the schema cookies moved (`schemaStateAt`). A preview's recorder makes and drops temporary
 * triggers and logs, which bumps the temp schema's cookie: the write after every preview read the
 * whole schema again, 1-6 ms of CPU beside 500 tables of 200 columns (`bench/effect-schema.ts`;
 * R13's leftover, session 38, R14). Observed here as the cached state itself, kept or computed anew.
 */
import { describe, expect, it } from 'vitest';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { schemaStateAt, schemaVersion } from '../../src/sqlite/sqlite-schema.ts';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';

describe("a preview keeps the write check's schema state", () => {
  const t = effectDatabase('agentdb-effect-schema-state-', 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE);');
  const state = () => schemaStateAt(t.db, schemaVersion(t.db));

  it('is not computed again after a preview', () => {
    const before = state();
    expect(previewEffect(t.db, "INSERT INTO t (v) VALUES ('a')", [], LIMITS, FX)).toMatchObject({ tables: [{ table: 't', inserted: 1 }] });
    expect(state()).toBe(before);
  });

  it('is computed again when the main schema changed', () => {
    const before = state();
    t.db.exec('CREATE TABLE u (x)');
    expect(state()).not.toBe(before);
    expect(state().definitions.has('table u')).toBe(true);
  });
});
