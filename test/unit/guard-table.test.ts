import { describe, expect, it } from 'vitest';
import { guardIntrospection, guardQuery, guardTableName, guardWrite, INTERNAL_TABLE_PREFIX, type GuardVerdict } from '../../src/guard/guard.ts';
import { ALLOWED } from './guard-cases/allowed.ts';
import { REFUSED } from './guard-cases/refused.ts';
import { variants } from './guard-cases/variants.ts';

const TOOLS = { q: guardQuery, w: guardWrite, i: guardIntrospection } as const;

function describeVerdict(v: GuardVerdict): string {
  return v.ok ? `ok ${v.kind}` : `${v.code}: ${v.reason}`;
}

describe('guard: refusals', () => {
  for (const group of REFUSED) {
    describe(group.why, () => {
      for (const sql of group.sql) {
        for (const tool of group.tools) {
          it(`${tool} ${JSON.stringify(sql)}`, () => {
            for (const variant of variants(sql)) {
              const v = TOOLS[tool](variant);
              expect(v.ok, `${JSON.stringify(variant)} → ${describeVerdict(v)}`).toBe(false);
              if (v.ok) continue;
              expect(v.code, `${JSON.stringify(variant)} → ${v.reason}`).toBe(group.code);
              expect(v.reason.length).toBeGreaterThan(10);
              expect(v.reason, JSON.stringify(variant)).toMatch(group.reason);
            }
          });
        }
      }
    });
  }
});

describe('guard: no false positives', () => {
  for (const group of ALLOWED) {
    describe(group.why, () => {
      for (const sql of group.sql) {
        it(`${group.tool} ${JSON.stringify(sql)}`, () => {
          for (const variant of variants(sql)) {
            const v = TOOLS[group.tool](variant);
            expect(v.ok, `${JSON.stringify(variant)} → ${describeVerdict(v)}`).toBe(true);
            if (v.ok) expect(v.kind).toMatch(new RegExp(`^(${group.kind})$`));
          }
        });
      }
    });
  }
});

describe('guard: verdict details', () => {
  it('marks DDL as ddl and DML as not', () => {
    expect(guardWrite('CREATE TABLE x(a)')).toEqual({ ok: true, kind: 'create_table', ddl: true });
    expect(guardWrite('ALTER TABLE x ADD b')).toEqual({ ok: true, kind: 'alter_table', ddl: true });
    expect(guardWrite('INSERT INTO x VALUES (1)')).toEqual({ ok: true, kind: 'insert', ddl: false });
    expect(guardQuery('SELECT 1')).toEqual({ ok: true, kind: 'select', ddl: false });
  });

  it('names the tool to use instead in a wrong-tool refusal', () => {
    expect(guardQuery('INSERT INTO t VALUES (1)')).toMatchObject({ reason: 'DATA_QUERY_SQL takes one SELECT; use DATA_WRITE_SQL for INSERT' });
    expect(guardQuery('UPDATE t SET a = 1')).toMatchObject({ reason: expect.stringContaining('for UPDATE') });
  });

  it('points at where the second statement starts', () => {
    const v = guardQuery('SELECT 1; DELETE FROM t');
    expect(v).toMatchObject({ ok: false, code: 'SQL_MULTIPLE_STATEMENTS', reason: expect.stringContaining('offset 10') });
  });

  it('answers rather than throws when handed something that is not a string', () => {
    for (const guard of [guardQuery, guardWrite, guardIntrospection]) {
      expect(guard(undefined as unknown as string)).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
      expect(guard(42 as unknown as string)).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
    }
  });

  it('refuses a WITH clause before DDL as a syntax error', () => {
    expect(guardWrite('WITH x AS (SELECT 1) CREATE TABLE t(a)')).toMatchObject({ ok: false, code: 'SQL_SYNTAX' });
  });
});

describe('guardTableName: the DATA_DROP_TABLE argument', () => {
  const refused: ReadonlyArray<[string, RegExp]> = [
    ['sqlite_master', /SQLite engine/],
    ['SQLITE_SEQUENCE', /SQLite engine/],
    ['sqlite_stat1', /SQLite engine/],
    ['_agentdb_calls', /internal to agentdb/],
    ['_AgentDB_Calls', /internal to agentdb/],
    [`${INTERNAL_TABLE_PREFIX}anything`, /internal to agentdb/],
    ['pragma_table_info', /PRAGMA/],
    ['dbstat', /virtual tables/],
    ['sqlite_dbpage', /virtual tables/],
    ['', /name the table/],
    ['a\u0000b', /NUL/],
  ];
  for (const [name, reason] of refused) {
    it(`refuses ${JSON.stringify(name)}`, () => {
      expect(guardTableName(name)).toMatchObject({ ok: false, code: 'SQL_REFUSED', reason: expect.stringMatching(reason) });
    });
  }

  it('accepts any other name, however it is spelled (the store quotes it)', () => {
    for (const name of ['t', 'drops_log', 'my table', 'temp', 'select', '"quoted"', 'sqlite', 'agentdb_calls', 'Ünïcode']) {
      expect(guardTableName(name), name).toEqual({ ok: true, kind: 'drop', ddl: true });
    }
  });
});
