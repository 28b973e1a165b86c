import type { Answered } from './answered-commits.ts';

/**
 * Commits answered whose copy failed (a full disk), by database path, oldest first: when a later
 * copy finds their frames, they take the times they were answered at, not that copy's. Stamped
 * with the later time, a restore to a moment in between left out writes already answered
 * (issue 25). The answered record on disk keeps only the last; this process keeps each, up to
 * {@link MAX_LATE_ANSWERS} per database (past that, the oldest take the time of a later one).
 */
export const lateAnswers = new Map<string, Map<string, Answered>>();
const MAX_LATE_ANSWERS = 100_000;

/**
 * The key of a commit among late answers: its WAL's salts and its commit frame. Each WAL numbers
 * its frames from 1 again, so a frame number alone names a commit of every WAL the database had:
 * keyed by it, an older WAL's record, already copied, hid the one the WAL in hand needed, and a
 * commit answered before a kill took the later copy's time (review R1, session 23).
 */
export function lateKey(salt1: number, salt2: number, frame: number): string {
  return `${salt1}:${salt2}:${frame}`;
}

/** Keeps a commit answered whose copy failed, by its WAL and commit frame ({@link lateKey}). */
export function noteLate(dbPath: string, noted: Answered): void {
  let byCommit = lateAnswers.get(dbPath);
  if (!byCommit) lateAnswers.set(dbPath, (byCommit = new Map()));
  byCommit.set(lateKey(noted.salt1, noted.salt2, noted.frame), noted);
  if (byCommit.size > MAX_LATE_ANSWERS) byCommit.delete(byCommit.keys().next().value!);
}
