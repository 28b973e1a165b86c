import type { ActivityEntry } from './activity-view.ts';
import type { RestorePlan } from './restore-plan.ts';
import { restoredBytes } from './restore-room.ts';

/** What a restore answers (the HTTP contract of `POST /v1/databases/:db/restore`). */
export interface RestoreResult {
  database: string;
  restoredTo: string;
  dryRun: boolean;
  snapshot: { id: string; at: string };
  frames: number;
  commits: number;
  /**
   * The database's size in bytes at the moment restored to (its pages then): what a restore in
   * place makes the file, or a new database's file; the byte quota is checked with it
   * (`restore-room.ts`).
   */
  restoredBytes: number;
  /** In place: the database's size in bytes before it (its pages now, checkpointed or not). */
  bytesBefore?: number;
  undoId?: string;
  into?: string;
  /**
   * An undo only: the commits made after the restore it undoes, which the undo discards (the
   * undo goes back to exactly the state before that restore). Said by the dry run too.
   */
  discardsCommits?: number;
  /** A dry run `into` a name the restore itself would refuse: why (`DATABASE_EXISTS: …`). */
  refused?: string;
  /**
   * A restore sent with `paidBytes` whose plan restores more whole MiB than were paid: nothing was
   * restored, and this is the moment's size, for the caller to charge before it sends it again.
   */
  unpaid?: number;
  /**
   * A dry run on a full disk: planned from the history copied so far, writing nothing
   * (`FULL_DISK_NOTE`). A restore in place whose commit is in but whose audit row or copy into
   * history failed (a full disk): what is left to the next restore (`restoreWithinGeneration`).
   */
  note?: string;
  /**
   * The history position of the state it restored, or a dry run would (`RestorePlan.state`): a
   * restore names it as its dry run does (session 35, N11: a real `--at` printed less).
   */
  keeps?: string;
  /**
   * A restore done (not a dry run): the newest activity entry it kept, when a page of the list
   * reached it, as a dry run's `after.kept`, so its words name what its dry run named.
   */
  kept?: ActivityEntry;
  /**
   * A restore done (not an undo): the activity entries it took away in place, listed by the
   * activity page `before` its own entry (`listedBefore`), down to `kept`; a fork: the entries of
   * the database it was made from that it leaves out (the newest ones, down to `kept`). Absent
   * when the list could not be read after it.
   */
  tookAway?: { entries: number; listedBefore?: string };
  /**
   * A dry run: the activity list's entries after that state, newest first — what the restore takes
   * away in place (those an earlier restore undid are gone already), or leaves out of a new
   * database — at most `RESTORE_PREVIEW_ENTRIES`, `more` when there are others.
   */
  after?: {
    entries: ActivityEntry[];
    more: boolean;
    /** How many entries are after that state in all (absent when the list could not be read). */
    count?: number;
    note?: string;
    /**
     * The newest entry the restore keeps, when the page reached it. Its id short of `keeps` means
     * the state restored is agentdb's own upkeep after it (a decision's audit row), which
     * `agentdb history` leaves out (review N5: a dry run named a moment no listed commit had).
     */
    kept?: ActivityEntry;
  };
}

/** A restore's answer from its plan: where it went, and `extra` (its undo id, a dry run's preview …). */
export function result(database: string, plan: RestorePlan, restoredTo: number, dryRun: boolean, extra: Partial<RestoreResult>): RestoreResult {
  return {
    database,
    restoredTo: new Date(restoredTo).toISOString(),
    dryRun,
    snapshot: { id: plan.snapshot.id, at: new Date(plan.snapshot.at).toISOString() },
    frames: plan.frames,
    commits: plan.commits,
    restoredBytes: restoredBytes(plan),
    keeps: plan.state,
    ...extra,
  };
}

/**
 * The note of a restore in place whose file is in place but whose new history generation could
 * not be begun (`err`: its history's disk full): the old generation keeps its mark, so the next
 * write or read of the database begins one from the file (a gap, not a loss).
 */
export function generationLater(id: string, err: unknown): string {
  const why = err instanceof Error ? err.message : String(err);
  return `restored; its new history generation could not be begun (${why}): the next write or read of ${id} begins it from the restored file once its history has room`;
}
