import { AgentDbError } from '../errors.ts';
import { commitPosition } from './commit-position.ts';
import type { HistorySource } from './history-files.ts';
import type { RestoreTarget } from './restore-plan.ts';

const DAY_MS = 24 * 3600 * 1000;

/** Where a restore to a moment or `through` a position goes (one of the two is set; an undo is handled apart). */
export function restoreTarget(source: HistorySource, req: { at?: number; through?: string }, retentionDays: number): RestoreTarget {
  return req.through !== undefined ? { position: commitPosition(source, req.through) } : { at: checkedMoment(req.at, retentionDays) };
}

/** The moment asked for, checked against the window: not in the future, not past the retention. */
export function checkedMoment(at: number | undefined, retentionDays: number): number {
  if (at === undefined || !Number.isFinite(at)) throw new AgentDbError('INVALID_ARGUMENTS', 'a restore needs a time (--at) or an undo id (--undo)');
  const now = Date.now();
  if (at > now) throw new AgentDbError('HISTORY_OUT_OF_RANGE', `${new Date(at).toISOString()} is in the future`);
  if (at < now - retentionDays * DAY_MS) {
    throw new AgentDbError('HISTORY_OUT_OF_RANGE', `${new Date(at).toISOString()} is older than the ${retentionDays} days of history kept`);
  }
  return at;
}
