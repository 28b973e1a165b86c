// DATA_DROP_TABLE on one database file: the object a drop would remove, as a reviewer sees it,
// and the drop itself with its exactly-once record. Moved out of sqlite-write.ts (a write's
// statement and record), with which it shares only the record and the transaction.

import type { Database } from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { MAX_SHOWN_DEFINITION_BYTES, type DropObject } from '../contracts/drop-object.ts';
import { AgentDbError } from '../errors.ts';
import { guardTableName } from '../guard/guard.ts';
import { effectDigest, ensureCallsTable, recordResult, recordedResult, type RecordedCall } from './call-record.ts';
import { refuseReferencedDrop, withoutForeignKeys } from './drop-cascade.ts';
import { recordCallActivity, type ActivityNote } from './sqlite-activity.ts';
import { INTERNAL_PREFIX } from './sqlite-schema.ts';
import { inWriteTransaction, quoteIdentifier, trusted } from './sqlite-trusted.ts';
import type { Replayable } from './sqlite-write.ts';
import { forgetStatements } from './statement-cache.ts';

/** What DATA_DROP_TABLE answers. */
export interface DropResult {
  dropped: string;
  type: 'table' | 'view';
}

/**
 * Drops one table or view exactly once per call key. The name must pass the guard and exist in
 * `sqlite_schema` as a table or view (matched without regard to case, as SQLite does); the DROP is built here with
 * the name quoted, so no agent SQL runs at all. With `expect` (what a person approved), the
 * object must still be that one — same type, definition, root page and row count — or nothing
 * is dropped: checked in the drop's own transaction, so nothing can change in between.
 * @throws AgentDbError NOT_FOUND, SQL_REFUSED, DROP_REFERENCED (rows of other tables refer to it), APPROVAL_STALE.
 */
export function drop(db: Database, table: string, callKey: string, expect?: DropObject, activity?: ActivityNote): Replayable<DropResult> {
  checkDropName(table);
  ensureCallsTable(db);
  const call: RecordedCall = { key: callKey, digest: effectDigest(['drop', table]) };
  let dropped = false;
  try {
    return withoutForeignKeys(db, () =>
      inWriteTransaction(db, () => {
        const recorded = recordedResult(db, call) as DropResult | undefined;
        if (recorded !== undefined) return { value: { ...recorded, replayed: true as const }, commit: false };
        const found = dropTarget(db, table);
        if (expect) {
          const stale = staleness(expect, dropObject(db, found));
          if (stale)
            throw new AgentDbError('APPROVAL_STALE', `${found.type} ${JSON.stringify(found.name)} is not the one approved: ${stale}. Nothing was dropped.`);
        }
        if (found.type === 'table') refuseReferencedDrop(db, found.name);
        db.prepare(`DROP ${found.type === 'view' ? 'VIEW' : 'TABLE'} main.${quoteIdentifier(found.name)}`).run();
        dropped = true;
        const result: DropResult = { dropped: found.name, type: found.type };
        recordResult(db, call, result);
        if (activity) recordCallActivity(db, activity, expect?.rows ?? null);
        return { value: result, commit: true };
      }),
    );
  } finally {
    if (dropped) forgetStatements(db);
  }
}

/**
 * The table or view a drop of `table` would remove. SQLite names are case-insensitive: `T`
 * drops table `t`, by the name it was created with.
 * @throws AgentDbError NOT_FOUND when there is none, or the refusal of a name no drop may take.
 */
export function dropTarget(db: Database, table: string): { type: 'table' | 'view'; name: string } {
  const found = trusted(db, `SELECT type, name FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')`).get(table) as
    | { type: 'table' | 'view'; name: string }
    | undefined;
  if (found === undefined) throw new AgentDbError('NOT_FOUND', `there is no table or view named ${JSON.stringify(table)}`);
  checkDropName(found.name);
  return found;
}

/**
 * The object a drop would remove, as a reviewer should see it (and as {@link drop} checks it
 * again): definition, root page and, for a table, its row count.
 */
export function dropObject(db: Database, found: { type: 'table' | 'view'; name: string }): DropObject {
  const row = trusted(db, `SELECT sql, rootpage FROM sqlite_schema WHERE name = ? AND type = ?`).get(found.name, found.type) as {
    sql: string | null;
    rootpage: number;
  };
  const rows =
    found.type === 'table'
      ? (trusted(db, `SELECT count(*) FROM main.${quoteIdentifier(found.name)}`)
          .pluck()
          .get() as number)
      : undefined;
  const whole = row.sql ?? '';
  return {
    type: found.type,
    name: found.name,
    definition: shownDefinition(whole),
    definitionSha256: createHash('sha256').update(whole).digest('hex'),
    rootpage: row.rootpage,
    ...(rows === undefined ? {} : { rows }),
  };
}

function shownDefinition(whole: string): string {
  const bytes = Buffer.byteLength(whole);
  if (bytes <= MAX_SHOWN_DEFINITION_BYTES) return whole;
  // Cut on a character, not inside one: the buffer's prefix decoded may end in a replacement.
  const head = Buffer.from(whole)
    .subarray(0, MAX_SHOWN_DEFINITION_BYTES - 64)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
  return `${head}…[${bytes} bytes in all]`;
}

/** What changed between the approved object and the one there now, or undefined. */
function staleness(approved: DropObject, now: DropObject): string | undefined {
  if (approved.type !== now.type) return `it was a ${approved.type} and is now a ${now.type}`;
  if (approved.rootpage !== now.rootpage) return `it is another ${now.type} than the one approved (renamed or replaced since)`;
  if (approved.definitionSha256 !== now.definitionSha256) return 'its definition changed';
  if (approved.rows !== now.rows) return `it held ${approved.rows} rows when approved and holds ${now.rows} now`;
  return undefined;
}

/**
 * Refuses a name no drop may take: the guard's verdict, then (second line) the engine's and
 * agentdb's own tables under any case.
 * @throws AgentDbError with the refusal.
 */
export function checkDropName(table: string): void {
  const verdict = guardTableName(table);
  if (!verdict.ok) throw new AgentDbError(verdict.code, verdict.reason);
  if (/^sqlite_/i.test(table) || table.toLowerCase().startsWith(INTERNAL_PREFIX)) {
    throw new AgentDbError('SQL_REFUSED', `${table} is not an agent table`);
  }
}
