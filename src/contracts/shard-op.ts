import type { ErrorCode } from '../errors.ts';
import { parseDatabaseId } from './database-id.ts';

/**
 * Work other than a tool call that must run where a database's files are: a grid page, a CSV
 * chunk, a restore, a backup. Everything that touches a database goes through its shard's
 * queue (DESIGN.md "One owner per shard"), so these are jobs on that queue too, named
 * `op:<op>`, handled by the shard owner (see `shardOpHandlers`).
 */
export interface ShardOpJobData {
  /** Which handler runs it (`shardOpHandlers`). */
  op: string;
  /** The database id it is about (`<workspace>` or `<workspace>/<agent>`), or absent for shard-wide work. */
  db?: string;
  /** The handler's own arguments, validated by the handler. */
  args: unknown;
  enqueuedAt: number;
}

/** A BullMQ job name of a shard op. Calls have other names. */
export const SHARD_OP_PREFIX = 'op:';

/** How a shard op ended: the handler's result, or a registry code with detail. */
export type ShardOpOutcome = { ok: true; result: unknown } | { ok: false; error: { code: ErrorCode; detail: string } };

/**
 * The workspace whose database a shard op works on: its share of the shard when it runs, its turn
 * in the queue when it waits (`ShardOpClient`); undefined for an op on none (a backup) or a
 * malformed id.
 */
export function opWorkspace(data: Pick<ShardOpJobData, 'db'>): string | undefined {
  if (typeof data.db !== 'string') return undefined;
  try {
    return parseDatabaseId(data.db).workspace;
  } catch {
    return undefined;
  }
}
