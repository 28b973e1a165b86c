import type { CsvArgs, PageArgs } from '../contracts/browse.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { ErrorCode } from '../errors.ts';
import type { PlanLimits } from './plan-limits.ts';
import type { AuditEntry } from './sqlite-audit.ts';
import type { Param } from './sqlite-values.ts';
import type { RecordedEffect } from './sqlite-calls.ts';

export type { Param };

/**
 * One database as the executor needs it: where the file is, which shard owns it (for
 * eviction when a lease is lost) and the plan's limits.
 */
export interface DbTarget {
  /** `<workspace>` or `<workspace>/<agent>` (see `databaseId`). */
  id: string;
  /** Absolute file path under DATA_DIR (see `databasePath`). */
  path: string;
  shard: number;
  limits: PlanLimits;
}

/**
 * What the worker asks an executor child to do; one request is one statement at most. `callId`
 * names the call a request serves, so a kill or a status line can say whose statement it was.
 */
export type ExecRequest = (
  | { op: 'describe'; db: DbTarget }
  /** `mode: 'introspect'`: db_query's rules, which also admit the read-only introspection PRAGMAs. */
  /**
   * `offload`: a result past the size limit is also written whole (up to `maxRows`) to a file
   * under `<dataDir>/tmp/results` (its `spill`), which the worker moves to the blob store.
   */
  | { op: 'query'; db: DbTarget; sql: string; params: Param[]; maxRows: number; mode?: 'introspect'; offload?: true }
  /** `callKey`: workspace, agent and call id (see `callKey`), the exactly-once key. */
  | { op: 'write'; db: DbTarget; sql: string; params: Param[]; callKey: string }
  /** `expect`: the object a person approved dropping; anything else is APPROVAL_STALE. */
  | { op: 'drop'; db: DbTarget; table: string; callKey: string; expect?: DropObject }
  /** Both guard layers, nothing runs: asked before a call is parked for a person's approval. */
  | { op: 'check'; db: DbTarget; sql: string; mode: 'read' | 'write' }
  /** What a drop of `table` would remove (a `DropObject`), or NOT_FOUND; nothing runs. Asked before parking. */
  | { op: 'checkDrop'; db: DbTarget; table: string }
  /** Keep a decision on a parked call in the database's own audit table. */
  | { op: 'audit'; db: DbTarget; entry: AuditEntry }
  /** A grid page of one table or view for a person (a trusted read, see sqlite-browse.ts). */
  | { op: 'browse'; db: DbTarget; args: Required<Pick<PageArgs, 'dir' | 'limit'>> & PageArgs }
  /** One chunk of a table as CSV text for a person's export (see sqlite-browse.ts). */
  | { op: 'csv'; db: DbTarget; args: Required<Pick<CsvArgs, 'maxChars'>> & CsvArgs }
  /**
   * Restores the database in place to a moment (`at`, epoch ms) or back to an undo point, after
   * every statement received before it; keeps the state before as a new undo point.
   */
  | { op: 'restore'; db: DbTarget; at?: number; undo?: string; dryRun?: boolean; by: RestoreActor }
  /**
   * Creates `db` (which must not exist) from database `source`'s history at `at`; `from`, where
   * the source's file is, lets it first wait for a copy of the source's last answered write.
   */
  | { op: 'restoreInto'; db: DbTarget; source: string; from?: Pick<DbTarget, 'id' | 'path' | 'shard'>; at: number; dryRun?: boolean; by: RestoreActor }
  /**
   * Copies into history what the database's WAL holds beyond it, after waiting for any child
   * still copying (a write is answered before its copy, under the write lock): from then on its
   * history holds every write answered before.
   */
  | { op: 'capture'; db: DbTarget }
  /** Starts a new history generation from a fresh snapshot, if anything was committed since the last. */
  | { op: 'snapshot'; db: DbTarget; reason: 'nightly' | 'manual' }
  /**
   * What became of a write or drop whose child died before answering it: its exactly-once
   * record, read on another child, says whether it committed (see `sqlite-calls.ts`).
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
 * What the `recorded` op answers: the call's result when its transaction committed. Absent, it
 * did not: the record is written in the same transaction as the effect.
 */
export interface RecordedOutcome {
  committed: boolean;
  result?: unknown;
}

/**
 * How a request ended. Agent errors are results, not exceptions: `ok: false` carries a registry
 * code and SQLite's or the guard's detail. `replayed` marks a write or drop whose call id had
 * already run: the result is the recorded one, and nothing ran again.
 */
export type ExecOutcome =
  | { ok: true; result: unknown; replayed?: boolean }
  /**
   * `unsettled`: a write or drop whose child died, and whether it committed could not be read;
   * the failure is not its answer, and the call is to be run again (its record replays it).
   */
  | { ok: false; error: { code: ErrorCode; detail: string }; unsettled?: true };

/**
 * Parent → child (several to a message): a request and the number its answer will carry.
 * `reopen` says another child has run this database since this one last did: a handle it kept
 * holds statements prepared against a schema that may have changed, so it is closed and opened
 * again before the request runs.
 */
export interface ChildRequest {
  id: number;
  req: ExecRequest;
  reopen?: true;
}

/** Child → parent. `ready` is sent once the child listens, so no request is sent into a void. */
/**
 * What a child sends: `ready` once it listens, then outcomes, each with the CPU time (µs, user +
 * system) the child spent on it — what the pool charges a workspace, since wall time on a busy
 * host counts the time the child waited for a core.
 */
export type ChildMessage =
  | { type: 'ready' }
  /**
   * The child has read every request up to `upTo` and starts on them. Sent before it runs any:
   * when a child dies, what it never read ran nowhere and goes to another child, uncharged (a
   * child killed while idle failed the next, innocent statement sent to it). One per message, not
   * per request: on a lone statement's round trip it cost the worker 2–10 µs of CPU (an echo
   * child, 20,000 round trips, on a loaded 2-core host), on a pipelined batch next to nothing.
   */
  | { type: 'took'; upTo: number }
  | { type: 'outcomes'; outcomes: { id: number; outcome: ExecOutcome; cpuUs?: number }[] };

/** What the child is started with, as one JSON argument. */
export interface ChildOptions {
  /** Every path a request names must lie inside this folder. */
  dataDir: string;
  heapLimitMb: number;
  handleCacheSize: number;
  maxResultBytes: number;
  /** The most an offloaded result's file may take (MAX_OFFLOAD_BYTES); absent: unbounded. */
  maxOffloadBytes?: number;
  /** Estimated bytes the child's cached statements may take (STATEMENT_CACHE_BYTES). */
  statementCacheBytes?: number;
  /** Point-in-time history capture; absent: off. */
  history?: HistoryOptions;
}

/** How an executor child keeps each database's history (see `history/capture.ts`). */
export interface HistoryOptions {
  /** Checkpoint a WAL once it passes this many bytes, after copying it (HISTORY_CHECKPOINT_BYTES). */
  checkpointBytes: number;
  /** Restores reach back this many days at most (HISTORY_RETENTION_DAYS). */
  retentionDays: number;
  /** A database's history quota in bytes (HISTORY_MAX_BYTES_PER_DB); absent or 0: 10× the plan's database size. */
  maxBytesPerDb?: number;
  /**
   * How far a database's WAL may run ahead of a failing history before writes answer
   * STORAGE_FULL (HISTORY_MAX_BEHIND_BYTES); absent: 64 MiB.
   */
  maxBehindBytes?: number;
}

/** Who asked for a restore, as the database's audit keeps it. */
export interface RestoreActor {
  who: string;
  via: 'key' | 'operator';
}
