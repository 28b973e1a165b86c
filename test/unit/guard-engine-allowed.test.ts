import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nullBindings, prepareChecked, type CheckMode } from '../../src/guard/engine-check.ts';
import { isTrivia, tokenize } from '../../src/guard/tokenizer.ts';
import { ALLOWED } from './guard-cases/allowed.ts';
import { tempDb, type TempDb } from './guard-cases/db.ts';

// The tables the look-alike statements in allowed.ts name, so SQLite can compile them.
const LOOKALIKE_SCHEMA = `
  CREATE TABLE notes (body, extra);
  CREATE TABLE drops_log (a);
  CREATE TABLE "pragma" (a);
  CREATE TABLE "drop" (a);
  CREATE TABLE "from" ("select");
  CREATE TABLE attach (a);
  CREATE TABLE weather (temp_c, temp, x);
  CREATE TABLE my_sqlite_table (a);
  CREATE TABLE agentdb_calls (a);
  CREATE TABLE w (a);
  CREATE TABLE q (n);
  CREATE INDEX i ON u(x);
  ALTER TABLE t ADD COLUMN id;
  ALTER TABLE t ADD COLUMN note;
  ALTER TABLE t ADD COLUMN doc;
  ALTER TABLE t ADD COLUMN name;
  ALTER TABLE t ADD COLUMN begin_date;
  ALTER TABLE t ADD COLUMN end_date;
  ALTER TABLE u ADD COLUMN a;
  ALTER TABLE u ADD COLUMN id;
  ALTER TABLE u ADD COLUMN c;
  ALTER TABLE w ADD COLUMN b;
  ALTER TABLE w ADD COLUMN c;
`;

const MODE: Record<'q' | 'w' | 'i', CheckMode> = { q: 'read', w: 'write', i: 'introspect' };

let tmp: TempDb;
beforeAll(() => {
  tmp = tempDb();
  tmp.db.exec(LOOKALIKE_SCHEMA);
});
afterAll(() => tmp.close());

/**
 * Layer 2 must not undo what layer 1 rightly allows: every look-alike that passes the
 * tokenizer also passes the bytecode check. SQLite may still reject one for its own reasons
 * (a column count, a missing column): that is SQL_ERROR, never SQL_REFUSED. Writes are
 * judged but not run, so each is checked against the same schema.
 */
describe('engine check: no false positives on allowed statements', () => {
  for (const group of ALLOWED) {
    it(`${group.why} (${group.sql.length} statements)`, () => {
      const refusedByEngine: string[] = [];
      for (const sql of group.sql) {
        const r = prepareChecked(tmp.db, sql, MODE[group.tool]);
        if (!r.ok && r.code !== 'SQL_ERROR') refusedByEngine.push(`${sql} → ${r.code}: ${r.reason}`);
      }
      expect(refusedByEngine).toEqual([]);
    });
  }

  it('compiles most of them outright, so the check above is not vacuous', () => {
    const all = ALLOWED.flatMap((g) => g.sql.map((sql) => prepareChecked(tmp.db, sql, MODE[g.tool])));
    const compiled = all.filter((r) => r.ok).length;
    expect(compiled / all.length).toBeGreaterThan(0.8);
  });
});

describe('engine check: statements with parameters', () => {
  it('inspects statements with any mix of parameter styles', () => {
    const param = fc.constantFrom('?', '?1', '?2', '?7', ':a', ':b', '@a', '$a', '$b', '#c', ':a', '?3');
    fc.assert(
      fc.property(fc.array(param, { minLength: 1, maxLength: 8 }), (params) => {
        const sql = `SELECT ${params.join(', ')}`;
        const lexed = tokenize(sql);
        expect(lexed.ok).toBe(true);
        const tokens = lexed.ok ? lexed.tokens.filter((t) => !isTrivia(t)) : [];
        // The bindings satisfy better-sqlite3 for the statement itself…
        expect(() => tmp.db.prepare(sql).all(...nullBindings(tokens)), sql).not.toThrow();
        // …and the whole check goes through.
        expect(prepareChecked(tmp.db, sql, 'read'), sql).toMatchObject({ ok: true });
      }),
      { numRuns: 300 },
    );
  });
});
