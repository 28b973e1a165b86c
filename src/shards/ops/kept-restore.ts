import type { RestoreResult } from '../../history/restore-result.ts';
import type { ShardOpContext } from './shard-ops.ts';

/**
 * A restore done in place, kept for the late answers of the writes it took back (`taken-back.ts`).
 * The restore is done whatever happens here: a record that cannot be written (Redis away) leaves
 * those answers without their note, as they were before it, rather than fail the restore.
 */
export async function keptRestore(ctx: ShardOpContext, id: string, done: RestoreResult, began: number, undoes: string | undefined): Promise<void> {
  if (!ctx.noteRestore || done.undoId === undefined) return;
  const record = { undoId: done.undoId, restoredTo: Date.parse(done.restoredTo), began, ...(undoes !== undefined ? { undoes } : {}) };
  await ctx.noteRestore(id, record).catch((err: unknown) => ctx.logger.warn({ db: id, err: String(err) }, 'restore record not kept'));
}
