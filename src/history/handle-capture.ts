import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { capture, finishCapture, lockForCapture, type CaptureOptions, type CaptureReport, type LockedCapture } from './capture.ts';
import { captureBeforeClose, closesUnchanged, sealedAsKnown, sealAfterClose, type PendingSeal } from './capture-on-close.ts';
import { historyBytes } from './history-bytes.ts';
import { historyDir, localSource, type HistorySource } from './history-files.ts';
import { sweepKeptDescriptors } from './kept-descriptors.ts';
import type { PlanLimits } from '../policy/plan-limits.ts';
import type { HandleCacheOptions, HandleTarget } from '../sqlite/handle-cache.ts';

/** How an executor child keeps each database's history (see `capture.ts`). */
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
  /** How long a read's `as_of` keeps a moment it restored, unused (AS_OF_KEEP_MINUTES); absent: 15 minutes. */
  asOfKeepMs?: number;
}

/**
 * History capture as the executor child runs it: after each committed write, when a handle
 * opens, before one closes. A capture that fails is logged and not the write's failure (the
 * write is committed): the frames stay in the WAL, which is not checkpointed until they are
 * copied, and the next capture of the database copies them.
 */
export class HistoryCapture {
  private readonly places = new Map<string, Place>();
  /**
   * Databases (by path) whose last copy into history failed, and since when (ms): their WAL holds
   * commits history lacks, the oldest from about then.
   */
  private readonly behind = new Map<string, number>();
  /** Of {@link behind}: whether the last failed copy failed for room on the disk. */
  private readonly behindForDisk = new Map<string, boolean>();
  private locked: { capture: LockedCapture; target: HandleTarget } | undefined;

  constructor(
    private readonly dataDir: string,
    readonly opts: HistoryOptions,
  ) {}

  /** Copies the database's new WAL frames into its history; never throws. */
  run(db: Database, target: HandleTarget): CaptureReport | undefined {
    return this.guarded(target, () => capture(db, target.path, this.captureOptions(target)));
  }

  /** As {@link run}, but a copy that fails throws (logged as every failed copy is). */
  copy(db: Database, target: HandleTarget): CaptureReport {
    return this.tracked(target, () => capture(db, target.path, this.captureOptions(target)));
  }

  /**
   * After a commit whose answer goes out before its frames are copied: takes the write lock and
   * the commit's time now, and leaves the copy to {@link finishCommitted}, which must run before
   * anything else touches a database. Held, the lock keeps every other connection from
   * committing or starting the WAL over, so the answer says nothing history could still lose but
   * to a kill (then whoever opens the database next copies the frames). The copy was a third of a
   * write's time in the child, waited for by the worker with nothing else to do.
   */
  afterCommit(db: Database, target: HandleTarget): void {
    this.finishCommitted();
    const locked = this.guarded(target, () => lockForCapture(db, target.path, this.captureOptions(target), true));
    if (!locked) return;
    this.locked = { capture: locked, target };
    // A copy that checkpoints (or whose commit could not be noted) goes before the answer: a
    // checkpoint may wait on readers, and that wait is this write's, not the next request's.
    if (locked.due) this.finishCommitted();
  }

  /** Copies what {@link afterCommit} locked; never throws. */
  finishCommitted(): void {
    const locked = this.locked;
    if (!locked) return;
    this.locked = undefined;
    this.guarded(locked.target, () => finishCapture(locked.capture));
  }

  /**
   * Refuses a write to a database whose history has passed its quota (HISTORY_MAX_BYTES_PER_DB,
   * or by default 10× the plan's database size): history is kept 30 days, so without a bound a
   * few large updates a second would fill the shared disk. Nothing is written; the history
   * shrinks again as the prune deletes what passed the retention.
   * @throws AgentDbError HISTORY_QUOTA (not metered: nothing ran)
   */
  checkQuota(target: HandleTarget & { limits: PlanLimits }): void {
    const quota = historyQuota(this.opts, target.limits);
    const place = this.placeOf(target);
    const used = historyBytes(target.path, place.source, place.root);
    if (used > quota) {
      throw new AgentDbError('HISTORY_QUOTA', `the history of ${target.id} takes ${used} bytes, past its quota of ${quota} bytes (HISTORY_MAX_BYTES_PER_DB)`);
    }
  }

  /**
   * The handle cache's hooks: copy on open (a crash left frames); copy before close (closing
   * checkpoints) and, when the close was the last, seal the generation. A handle opened to query
   * a database whose WAL is empty and whose file is still as history sealed it (`sealedAsKnown`)
   * has nothing to copy on open, and puts it off until it is opened for anything else; closed
   * before that, with its WAL still empty, it copies and seals nothing either
   * (`closesUnchanged`): the close leaves the file as it was (issue 31).
   */
  hooks(): Pick<HandleCacheOptions, 'onOpened' | 'beforeClose' | 'afterClose' | 'walAutocheckpoint'> {
    return {
      onOpened: (db, target, intent) => {
        if (intent === 'query' && walEmpty(target.path) && sealedAsKnown(target.path, this.placeOf(target).source)) return false;
        this.run(db, target);
        return true;
      },
      // Not guarded: a copy that fails keeps the handle open (see `HandleCache`), since closing
      // would checkpoint frames history lacks into the file, lost to every restore.
      beforeClose: (db, target, opened) =>
        opened || !closesUnchanged(db, target.path) ? this.tracked(target, () => captureBeforeClose(db, target.path, this.captureOptions(target))) : undefined,
      afterClose: (target, token) => {
        // The handle's -shm and database file descriptors, kept open while it was (see
        // kept-descriptors.ts), go now.
        sweepKeptDescriptors();
        return this.guarded(target, () => sealAfterClose(target.path, token as PendingSeal | undefined));
      },
      walAutocheckpoint: 0,
    };
  }

  private captureOptions(target: HandleTarget) {
    return this.placeOf(target).capture;
  }

  /**
   * Where a database's history is, worked out once per database: a write's quota check and
   * capture each built the same paths again (string work that showed in a capture's profile).
   */
  private placeOf(target: HandleTarget): Place {
    let place = this.places.get(target.id);
    if (!place) {
      // A child may see many databases over its life; the paths are cheap to build again.
      if (this.places.size >= MAX_PLACES) this.places.clear();
      const source = localSource(this.dataDir, target.id);
      place = { source, root: historyDir(this.dataDir, target.id), capture: { source, checkpointBytes: this.opts.checkpointBytes } };
      this.places.set(target.id, place);
    }
    return place;
  }

  private guarded<T>(target: HandleTarget, fn: () => T): T | undefined {
    try {
      return this.tracked(target, fn);
    } catch {
      return undefined;
    }
  }

  /** Runs a copy, noting whether the database's history is behind its WAL; logs and rethrows a failure. */
  private tracked<T>(target: HandleTarget, fn: () => T): T {
    try {
      const out = fn();
      this.behind.delete(target.path);
      this.behindForDisk.delete(target.path);
      return out;
    } catch (err) {
      if (!this.behind.has(target.path)) this.behind.set(target.path, Date.now());
      const disk = (err as { code?: string }).code === 'ENOSPC' || /ENOSPC|disk full/.test(String(err));
      this.behindForDisk.set(target.path, disk);
      process.stderr.write(
        `${JSON.stringify({ level: 50, time: Date.now(), msg: 'history capture failed; the frames stay in the WAL (not checkpointed) and the next commit tries again', db: target.id, disk, err: String(err) })}\n`,
      );
      throw err;
    }
  }

  /**
   * Refuses a new write while the database's history is behind its WAL by more than
   * {@link MAX_UNCAPTURED_WAL_BYTES}: its commits are safe in the WAL (never checkpointed before
   * they are copied), but the WAL would grow without end while copies fail. Runs inside the
   * write's transaction, after its replay check (a write already committed answers what it did);
   * {@link catchUp} before it copies again, so writes resume by themselves once that works.
   * @throws AgentDbError STORAGE_FULL (retryable; nothing is written)
   */
  checkBacklog(target: HandleTarget): void {
    if (!this.behind.has(target.path)) return;
    const wal = fs.statSync(`${target.path}-wal`, { throwIfNoEntry: false })?.size ?? 0;
    const bound = this.opts.maxBehindBytes ?? MAX_UNCAPTURED_WAL_BYTES;
    if (wal >= bound) {
      throw new AgentDbError(
        'STORAGE_FULL',
        `the history of ${target.id} cannot be written (its last copy failed) and its WAL already holds ${wal} bytes waiting to be copied (HISTORY_MAX_BEHIND_BYTES: ${bound})`,
      );
    }
  }

  /**
   * Since when (ms) the oldest commit that history lacks has waited in its WAL, over every
   * database this child has open; undefined when history holds every commit (what the worker
   * shows as `agentdb_history_capture_lag_seconds`). A copy answered before it runs (see
   * {@link afterCommit}) takes a few milliseconds and is not counted.
   */
  oldestBehind(): number | undefined {
    let oldest: number | undefined;
    for (const since of this.behind.values()) if (oldest === undefined || since < oldest) oldest = since;
    return oldest;
  }

  /**
   * Why the database's history lacks commits its WAL holds, for a message: since when its copies
   * fail and, when known, that the disk is full; undefined when its last copy worked.
   */
  behindCause(path: string): string | undefined {
    const since = this.behind.get(path);
    if (since === undefined) return undefined;
    const disk = this.behindForDisk.get(path) === true ? ': the disk that holds its history is full (ENOSPC)' : '';
    return `its copies into history have failed since ${new Date(since).toISOString()}${disk}`;
  }

  /** Since when (ms) the database's copies into history fail, and whether for a full disk; undefined when its last copy worked. */
  behindOf(path: string): { since: number; disk: boolean } | undefined {
    const since = this.behind.get(path);
    return since === undefined ? undefined : { since, disk: this.behindForDisk.get(path) === true };
  }

  /** Before a write to a database whose last copy failed: copies again (outside any transaction). */
  catchUp(db: Database, target: HandleTarget): void {
    if (this.behind.has(target.path)) this.run(db, target);
  }
}

/** Whether the database's WAL holds nothing (or is not there): a capture would find no frame. */
function walEmpty(dbPath: string): boolean {
  return (fs.statSync(`${dbPath}-wal`, { throwIfNoEntry: false })?.size ?? 0) === 0;
}

interface Place {
  source: HistorySource;
  root: string;
  capture: CaptureOptions;
}

const MAX_PLACES = 4096;

/**
 * How far a database's WAL may run ahead of a failing history before writes are refused
 * (STORAGE_FULL), unless HISTORY_MAX_BEHIND_BYTES says otherwise: 64 MiB, a few checkpoints' worth at the default HISTORY_CHECKPOINT_BYTES. On a
 * full disk the WAL cannot grow either and writes fail sooner; this bounds a copy that fails for
 * any other reason.
 */
const MAX_UNCAPTURED_WAL_BYTES = 64 * 1024 * 1024;

/** A database's history quota: HISTORY_MAX_BYTES_PER_DB, or when 0 ten times the plan's database size. */
export function historyQuota(opts: HistoryOptions, limits: PlanLimits): number {
  return opts.maxBytesPerDb && opts.maxBytesPerDb > 0 ? opts.maxBytesPerDb : 10 * limits.maxBytes;
}
