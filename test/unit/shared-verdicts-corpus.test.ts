/**
 * Review R3 (issue 31's shared verdicts): a read admitted on one handle is taken on another of a
 * byte-identical schema without EXPLAIN. Every corpus statement (and its spellings) admitted on A
 * must get, on B, the verdict the full check gives on B, with B holding other rows and other
 * planner statistics (sqlite_stat1) under the same schema text.
 */
import { describe, expect, it } from 'vitest';
import { prepareChecked } from '../../src/guard/engine-check.ts';
import { schemaIdentity, SharedVerdicts } from '../../src/sqlite/shared-verdicts.ts';
import { ALLOWED } from './guard-cases/allowed.ts';
import { REFUSED } from './guard-cases/refused.ts';
import { variants } from './guard-cases/variants.ts';
import { tempDb } from './guard-cases/db.ts';

const EXTRA = [
  'SELECT * FROM tv',
  'SELECT * FROM u WHERE x = 1',
  'SELECT * FROM u WHERE y = ? AND x = ?',
  'SELECT * FROM u INDEXED BY u_x WHERE x > 0',
  'SELECT * FROM t, u WHERE t.a = u.x',
  "SELECT * FROM u WHERE note LIKE 'a%'",
  'SELECT * FROM json_each(?)',
  'SELECT value FROM json_tree(\'{"a":1}\')',
];

/** The `?` in a statement: as many values as it is given (a `?` in a string makes a read fail, and it is skipped). */
function paramCount(sql: string): number {
  return (sql.match(/\?/g) ?? []).length;
}

describe('shared verdicts against the full check, over the guard corpus', () => {
  it('never admits on B what a full check on B refuses, primed on A (same schema, other stats and data)', () => {
    const a = tempDb();
    const b = tempDb();
    try {
      for (const d of [a.db, b.db]) d.exec('ANALYZE');
      // B: other data and other statistics, same schema text.
      b.db.exec(
        "DELETE FROM sqlite_stat1; INSERT INTO sqlite_stat1 VALUES ('u','u_x','1000000 1'), ('t',NULL,'5'), ('u','sqlite_autoindex_u_1','1000000 100000')",
      );
      b.db.exec("INSERT INTO u SELECT value, 'z' || value, NULL FROM json_each('[1,2,3,4,5,6,7,8,9,10]')");
      a.db.close();
      b.db.close();
      a.reopen();
      b.reopen();
      expect(schemaIdentity(a.db).digest).toBe(schemaIdentity(b.db).digest);
      const sqls = new Set<string>(EXTRA);
      for (const g of ALLOWED) for (const s of g.sql) for (const v of variants(s)) sqls.add(v);
      for (const g of REFUSED) for (const s of g.sql) for (const v of variants(s)) sqls.add(v);
      const verdicts = new SharedVerdicts();
      const wrong: string[] = [];
      let shared = 0;
      let ran = 0;
      for (const sql of sqls) {
        const onA = verdicts.check(a.db, sql, 'read');
        if (!onA.ok) continue;
        const onB = verdicts.check(b.db, sql, 'read');
        const full = prepareChecked(b.db, sql, 'read');
        shared++;
        if (onB.ok !== full.ok) wrong.push(`${sql} => shared ${onB.ok} full ${full.ok}`);
        // One row at most is carried as the full check on B says it (review R2), and holds there:
        // read whole with all(), such a statement must never return two rows, whatever its values.
        else if (onB.ok && full.ok && onB.singleRow !== full.singleRow) wrong.push(`${sql} => shared singleRow ${onB.singleRow} full ${full.singleRow}`);
        else if (onB.ok && onB.singleRow) {
          for (const value of [null, 0, 1, 2, 5, 'a', 'z1', -1]) {
            let rows: unknown[];
            try {
              rows = onB.stmt.all(...Array(paramCount(sql)).fill(value));
            } catch {
              // Named parameters or a value of the wrong kind for one: the other values still run.
              continue;
            }
            ran++;
            if (rows.length > 1) wrong.push(`${sql} => singleRow, ${rows.length} rows for ${String(value)}`);
          }
        }
      }
      // Enough of the corpus is admitted on A for the comparison to mean something.
      expect(shared).toBeGreaterThan(100);
      expect(ran).toBeGreaterThan(200);
      expect(wrong).toEqual([]);
    } finally {
      a.close();
      b.close();
    }
  });
});
