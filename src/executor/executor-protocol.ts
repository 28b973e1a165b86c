import type { CsvArgs, PageArgs } from '../contracts/browse.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { Effect, EffectLimits } from '../contracts/effect.ts';
import type { ErrorCode } from '../errors.ts';
import type { AuditEntry } from '../sqlite/sqlite-audit.ts';
import type { ActivityNote } from '../sqlite/sqlite-activity.ts';
import type { Param } from '../sqlite/sqlite-values.ts';
import type { RecordedEffect, RecordedOutcome } from '../sqlite/call-record.ts';
import type { DbTarget } from '../sqlite/db-target.ts';
import type { AsOfTarget } from '../history/as-of-moment.ts';
import type { HistoryOptions } from '../history/handle-capture.ts';
import type { RestoreActor } from '../history/restore-audit.ts';
import type { RestoreInPlaceRequest, RestoreIntoRequest, SnapshotRequest } from '../history/restore-requests.ts';

// Defined in the layers below the executor (which use them too), re-exported as the protocol's words.
export type { AsOfTarget, DbTarget, HistoryOptions, Param, RecordedOutcome, RestoreActor };

/**
 * A read of a past moment (`as_of`), read-only, from a file restored there (see `as-of-cache.ts`).
 * `build`: the worker checked the workspace's disk quota, and the moment may be restored when it
 * is not kept; without it, such a read runs nothing and answers the room it needs (`needsRoom`).
 */
export interface AsOfRead {
  target: AsOfTarget;
  build?: true;
  /**
   * Restore the moment (with `build`) and answer without reading it (`result: null`): the
   * restore runs under its own limit, the read after it under the statement's (review 19, H27).
   */
  buildOnly?: true;
}

/** A write's {@link ActivityNote}, whose statement is the write's own SQL unless it says otherwise. */
export type WriteActivityNote = Omit<ActivityNote, 'statement'> & { statement?: string };

/**
 * What the worker asks an executor child to do; one request is one statement at most. `callId`
 * names the call a request serves, so a kill or a status line can say whose statement it was.
 */
export type ExecRequest = (
  | { op: 'describe'; db: DbTarget; asOf?: AsOfRead }
  /** Size, tables, rows (counted up to a cap) and last write, for the Data page (see `databaseFigures`). */
  | { op: 'figures'; db: DbTarget }
  /** `mode: 'introspect'`: db_query's rules, which also admit the read-only introspection PRAGMAs. */
  /**
   * `offload`: a result past the size limit is also written whole (up to `maxRows`) to a file
   * under `<dataDir>/tmp/results` (its `spill`), which the worker moves to the blob store.
   */
  | { op: 'query'; db: DbTarget; sql: string; params: Param[]; maxRows: number; mode?: 'introspect'; offload?: true; asOf?: AsOfRead }
  /**
   * `callKey`: workspace, agent and call id (see `callKey`), the exactly-once key. `effect`: the
   * effect a person approved; another effect commits nothing (APPROVAL_STALE with the new one).
   */
  | {
      op: 'write';
      db: DbTarget;
      sql: string;
      params: Param[];
      callKey: string;
      effect?: { digest: string; limits: EffectLimits };
      /**
       * What the commit's activity row says of it (see `sqlite-activity.ts`). Its statement is
       * `sql` when left out, as the worker leaves it: sent in both, a write's SQL crossed to the
       * child twice, in the worker's serialisation and the child's parse (issue 31).
       */
      activity?: WriteActivityNote;
      /**
       * Why the workspace's disk quota refuses the write (its bytes are past it): refused with
       * QUOTA_EXCEEDED in the write's transaction, after the replay, so a write already committed
       * still answers what it did.
       */
      overQuota?: string;
    }
  /** What a write would change now (an `Effect`), in a transaction always rolled back. Asked before parking. */
  | { op: 'effect'; db: DbTarget; sql: string; params: Param[]; limits: EffectLimits }
  /** `expect`: the object a person approved dropping; anything else is APPROVAL_STALE. */
  | { op: 'drop'; db: DbTarget; table: string; callKey: string; expect?: DropObject; activity?: ActivityNote }
  /**
   * The database's activity rows (`sqlite-activity.ts`): every row's order and time, with `seqs`
   * those rows whole, with `after` the order and time of the rows after it (`activitySince`),
   * at most `limit` of them (a page reads them in pieces: one message of every row stalled the worker).
   * With `catchUp`, none: history copies what its failed copies left in the WAL (a full disk
   * since freed), so a page of an idle database is not `behind` until its next write.
   */
  | { op: 'activity'; db: DbTarget; seqs?: number[]; after?: number; limit?: number; catchUp?: true }
  /** Both guard layers, nothing runs: asked before a call is parked for a person's approval. */
  | { op: 'check'; db: DbTarget; sql: string; mode: 'read' | 'write' }
  /** What a drop of `table` would remove (a `DropObject`), or NOT_FOUND; nothing runs. Asked before parking. */
  | { op: 'checkDrop'; db: DbTarget; table: string }
  /** Keep a decision on a parked call in the database's own audit table. */
  | { op: 'audit'; db: DbTarget; entry: AuditEntry }
  /**
   * The statement of restore `id`'s row in the database's audit table (`{ statement }`, null when
   * it has none): a restore from the blob store run again asks whether its first run made the database.
   */
  | { op: 'restoreAudited'; db: DbTarget; id: string }
  /** A grid page of one table or view for a person (a trusted read, see sqlite-browse.ts). */
  | { op: 'browse'; db: DbTarget; args: Required<Pick<PageArgs, 'dir' | 'limit'>> & PageArgs; asOf?: AsOfRead }
  /** One chunk of a table as CSV text for a person's export (see sqlite-browse.ts). */
  | { op: 'csv'; db: DbTarget; args: Required<Pick<CsvArgs, 'maxChars'>> & CsvArgs }
  /** Restores in place or into a new database (see `restore-requests.ts`). */
  | RestoreInPlaceRequest
  | RestoreIntoRequest
  /**
   * Copies into history what the database's WAL holds beyond it, after waiting for any child
   * still copying (a write is answered before its copy, under the write lock): from then on its
   * history holds every write answered before.
   */
  | { op: 'capture'; db: DbTarget }
  /** Starts a new history generation from a fresh snapshot (see `restore-requests.ts`). */
  | SnapshotRequest
  /**
   * What became of a write or drop whose child died before answering it: its exactly-once
   * record, read on another child, says whether it committed (see `call-record.ts`).
   */
  | { op: 'recorded'; db: DbTarget; callKey: string; effect: RecordedEffect }
  /** Close every handle of these shards (their lease was lost). */
  | { op: 'evict'; shards: number[] }
  /**
   * Close this child's handle of one database file, if open: a restore in place is about to
   * replace the file, and no connection may have it open then (the pool sends it to every child).
   */
  | { op: 'close'; path: string }
  /** What the child holds: open handles, cached statements and their estimated bytes, its RSS. */
  | { op: 'stats' }
) & {
  callId?: string;
  /** Its own deadline, for work longer than any statement (a restore); STATEMENT_TIMEOUT_MS when absent. */
  timeoutMs?: number;
};

/**
 * How a request ended. Agent errors are results, not exceptions: `ok: false` carries a registry
 * code and SQLite's or the guard's detail. `replayed` marks a write or drop whose call id had
 * already run: the result is the recorded one, and nothing ran again.
 */
export type ExecOutcome =
  /**
   * `asOf`, for a read of the past: whether it restored its moment (`materialised`), or, when
   * it ran nothing, the bytes restoring it needs (`needsRoom`: ask again with `build`).
   */
  | { ok: true; result: unknown; replayed?: boolean; asOf?: { materialised?: boolean; needsRoom?: number } }
  /**
   * `unsettled`: the failure is not the request's answer, and the call is to be run again: a
   * write or drop whose child died, and whether it committed could not be read (its record
   * replays it), or any request while no child could start (nothing ran). `effect`: an approved
   * write whose effect changed since (APPROVAL_STALE): the effect it would have now.
   */
  | { ok: false; error: { code: ErrorCode; detail: string }; unsettled?: true; effect?: Effect };

/**
 * Parent → child (several to a message): a request and the number its answer will carry.
 * `reopen` says another child has run this database since this one last did: a handle it kept
 * holds statements prepared against a schema that may have changed, so it is closed and opened
 * again before the request runs.
 */
export interface ChildRequest {
  id: number;
  req: WireRequest;
  reopen?: true;
  /** `req.db` is sent whole, and the child keeps it under this number (see `target-refs.ts`). */
  ref?: number;
}

/**
 * A request as it crosses to the child: its target whole, or as the number the child keeps it
 * under once sent whole (see `target-refs.ts`).
 */
export type WireRequest = ExecRequest | (DistributiveOmit<Extract<ExecRequest, { db: DbTarget }>, 'db'> & { db: number });

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * What a child sends on its IPC channel: `ready` once it listens (so no request is sent into a
 * void), then outcomes, each with the CPU time (µs, user + system) the child spent on it — what
 * the pool charges a workspace, since wall time on a busy host counts the time the child waited
 * for a core. Which request it is running goes in a file of its own (see `statement-marks.ts`).
 * With its outcomes, how far history capture is behind (`HistoryCapture.oldestBehind`).
 */
export type ChildMessage =
  | { type: 'ready' }
  | {
      type: 'outcomes';
      outcomes: { id: number; outcome: ExecOutcome; cpuUs?: number }[];
      /** Since when (ms) the oldest commit history lacks has waited, over the child's databases; absent: none. */
      captureBehindSince?: number;
    };

/** What the child is started with, as one JSON argument. */
export interface ChildOptions {
  /** DATA_DIR: every path a request names must lie inside this folder; the child opens nothing outside it. */
  dataDir: string;
  /** Memory SQLite may use in each child, in MiB (see `dataLimitKiB`). */
  heapLimitMb: number;
  /** Open SQLite handles each child keeps. */
  handleCacheSize: number;
  /** Query results are cut to this much JSON. */
  maxResultBytes: number;
  /** The most an offloaded result's file may take (MAX_OFFLOAD_BYTES); absent: unbounded. */
  maxOffloadBytes?: number;
  /** Estimated bytes the child's cached statements may take (STATEMENT_CACHE_BYTES); the child's default when absent. */
  statementCacheBytes?: number;
  /** Point-in-time history capture; absent: off (`HISTORY_CAPTURE=off`). */
  history?: HistoryOptions;
}
