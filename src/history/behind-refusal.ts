import { AgentDbError } from '../errors.ts';
import type { HistoryCapture } from './handle-capture.ts';
import type { HistorySource } from './history-files.ts';
import { planRestore } from './restore-plan.ts';

/**
 * Refuses to restore or read a database at a moment at or past the last commit its history
 * holds while its copies into history fail: its WAL then holds acknowledged commits history
 * lacks, their times unknown, so the state history holds would be answered as that moment's
 * with writes acknowledged before it left out, without a word (session 36, F15: a fork, 51 of
 * 460 writes; F16: a restore in place, which also undid them, and an `as_of` read by time).
 * A moment before history's last commit is answered as before: history holds it whole.
 * `done`: what the refused request did not do, for the message ("nothing was restored").
 * @throws AgentDbError STORAGE_FULL when the copies fail for a full disk, else HISTORY_BEHIND (both retryable)
 */
export function refuseBehind(history: HistoryCapture, source: HistorySource, db: { id: string; path: string }, at: number, asked: string, done: string): void {
  const behind = history.behindOf(db.path);
  if (!behind) return;
  const end = planRestore(source, { at: Date.now() }).restoredTo;
  if (at < end) return;
  const room = behind.disk ? 'make room on the disk that holds its history, then ' : '';
  throw new AgentDbError(
    behind.disk ? 'STORAGE_FULL' : 'HISTORY_BEHIND',
    `the history of ${db.id} holds its commits up to ${new Date(end).toISOString()} only (${history.behindCause(db.path)}); the writes after it are in the database, ` +
      `so ${asked} ${new Date(at).toISOString()} would leave them out: ${done}. To get it whole, ${room}try again once history has copied them (on the next write or read of ${db.id}); ` +
      `a moment up to ${new Date(end).toISOString()} is whole now.`,
  );
}
