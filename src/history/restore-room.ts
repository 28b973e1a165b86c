import type { RestorePlan } from './restore-plan.ts';

/**
 * What a restore adds to its workspace's disk, for the byte quota (`WorkspaceQuota`), from what
 * its plan knows before anything is written: the size of the moment it restores to
 * (`RestoreResult.restoredBytes`, the plan's pages) and the database's size now (its pages,
 * `RestoreResult.bytesBefore`: the file's own size leaves out what waits in the WAL for its
 * checkpoint). The WAL file is left out of the sum: checkpoints write over it in place (RESTART),
 * so it keeps its size whatever the restore does.
 *
 * - In place (and its undo): the file goes from its size now to the moment's, and history gains
 *   at most the moment's size (the pages rewritten, as a WAL commit within the generation or a
 *   new generation's base commit on the linked snapshot, which counts once). A restore that
 *   shrinks the file may free more than its history adds: the sum is then below zero.
 * - Into a new database: its file, the moment's size, and its history's base commit, at most
 *   that again (the snapshot it begins from is linked to the source's and counts once).
 *
 * An audit row and an undo point add a few pages more; a restore's temp file (the rebuilt
 * moment, beside the live file until it replaces it) holds the moment's size only while the
 * restore runs. Checked with the database's size now (the T3 check) a restore could pass the
 * quota by up to the moment's size, and one that shrinks the file was refused (review L2).
 * @param bytesNow in place, the database's pages now in bytes; undefined for a restore into a new database.
 */
export function restoreAdds(plan: Pick<RestorePlan, 'dbPages' | 'snapshot'>, bytesNow: number | undefined): number {
  const restored = restoredBytes(plan);
  return bytesNow === undefined ? 2 * restored : 2 * restored - bytesNow;
}

/** The size of the moment a plan restores to: its pages, in bytes (`RestoreResult.restoredBytes`). */
export function restoredBytes(plan: Pick<RestorePlan, 'dbPages' | 'snapshot'>): number {
  return plan.dbPages * plan.snapshot.pageSize;
}
