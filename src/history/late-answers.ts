import type { Answered } from './answered-commits.ts';

/**
 * Commits answered whose copy failed (a full disk), by database path, oldest first: when a later
 * copy finds their frames, they take the times they were answered at, not that copy's. Stamped
 * with the later time, a restore to a moment in between left out writes already answered
 * (issue 25). The answered record on disk keeps only the last; this process keeps each, up to
 * {@link MAX_LATE_ANSWERS} per database (past that, the oldest take the time of a later one).
 */
export const lateAnswers = new Map<string, Map<number, Answered>>();
const MAX_LATE_ANSWERS = 100_000;

/** Keeps a commit answered whose copy failed, by its commit frame. */
export function noteLate(dbPath: string, noted: Answered): void {
  let byFrame = lateAnswers.get(dbPath);
  if (!byFrame) lateAnswers.set(dbPath, (byFrame = new Map()));
  byFrame.set(noted.frame, noted);
  if (byFrame.size > MAX_LATE_ANSWERS) byFrame.delete(byFrame.keys().next().value!);
}
