import { diskIsFull, isDiskFull } from '../sqlite/sqlite-errors.ts';

/**
 * What a restore's dry run adds when the disk was full: it planned from the history index as it
 * stands, writing nothing (no reader marker, no capture), so commits still waiting in the WAL
 * for their copy (a full disk stops those copies) are not in the plan.
 */
export const FULL_DISK_NOTE =
  'The disk is full: this dry run was planned from the history copied so far, writing nothing; commits that still wait in the WAL for their copy are not counted.';

/**
 * Whether `err`, thrown by a step that writes (a node write, or SQLite opening a closed database,
 * which must make its -shm and -wal), came from a full disk: node's ENOSPC or EDQUOT, or SQLite's
 * bare "disk I/O error" or "unable to open" with the disk of `near` out of room.
 */
export function fullDiskFault(err: unknown, near: string): boolean {
  if (isDiskFull(err)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(IOERR|CANTOPEN|FULL)/.test(code) && diskIsFull(near);
}

/**
 * Runs `step`, one a restore takes before it plans (opening the database, which brings its
 * history up to date), and, for a dry run on a full disk, goes on without it: a dry run only
 * reads the history index, and answered STORAGE_FULL for the want of room it did not need.
 * @returns true when the step was given up for a full disk (say {@link FULL_DISK_NOTE}).
 * @throws what `step` threw, for a real restore or any other fault.
 */
export function skippedOnFullDisk(dryRun: boolean | undefined, near: string, step: () => void): boolean {
  try {
    step();
    return false;
  } catch (err) {
    if (dryRun !== true || !fullDiskFault(err, near)) throw err;
    return true;
  }
}
