import Database from 'better-sqlite3';
import { hardenConnection } from '../guard/engine-check.ts';
import { openHandle } from './handle-open.ts';
import { forgetStatements } from './statement-cache.ts';

/** What the cache needs to know about a database to open it. */
export interface HandleTarget {
  id: string;
  path: string;
  shard: number;
}

/** Options of a {@link HandleCache}. */
export interface HandleCacheOptions {
  /** Handles kept open at most (config HANDLE_CACHE_SIZE); the least recently used is closed. */
  size: number;
  /** How long SQLite waits on a lock held by another connection (a backup, the CLI). */
  busyTimeoutMs?: number;
  /** SQLite page cache per handle, in KiB: many handles stay open, so each stays small. */
  pageCacheKiB?: number;
  /** SQLite's `wal_autocheckpoint` for every handle (0 with history capture); SQLite's default when absent. */
  walAutocheckpoint?: number;
  /**
   * Runs on each handle opened (history capture copies what the WAL still holds). For a handle
   * opened to `query` it may decline, returning false; it is then asked again when the handle is
   * next opened for anything else (see {@link OpenIntent}).
   */
  onOpened?: (db: Database.Database, target: HandleTarget, intent: OpenIntent) => boolean | undefined;
  /**
   * Runs before a handle closes (closing the last connection checkpoints the WAL); what it
   * returns is handed to `afterClose` once the handle is closed. When it throws (history could
   * not copy the WAL: a full disk), the handle is not closed: see {@link HandleCache}.
   * `opened` says whether `onOpened` ran for this handle (it did not decline).
   */
  beforeClose?: (db: Database.Database, target: HandleTarget, opened: boolean) => unknown;
  /** Runs once a handle is closed, with what `beforeClose` returned. */
  afterClose?: (target: HandleTarget, token: unknown) => void;
  /**
   * A miss leaves the close of the least recently used handle to {@link HandleCache.settle},
   * which the executor child runs once its answer is sent: with many more databases than
   * handles, nearly every read is a miss, and need not wait for another database's close (issue
   * 31). Until then the cache holds one handle more than `size`. History's look at the new
   * handle (`onOpened`) is not put off: what it copies or begins is stamped before the answer.
   */
  settleLater?: boolean;
}

/** How often held handles (see {@link HandleCache}) are tried again, at most. */
const HELD_RETRY_MS = 1000;

/**
 * Why a handle is wanted. Only writes and drops create a database; a read of one that does not
 * exist must leave no file behind. `query` is a read through SQL that changes nothing and needs
 * nothing of history: `onOpened` may put itself off until the handle is opened for anything
 * else (a write, or a read of history), so a database opened only to be queried — most handle
 * cache misses with many databases — need not pay history's copy on open (issue 31).
 */
export type OpenIntent = 'query' | 'read' | 'write';

interface Entry {
  db: Database.Database;
  shard: number;
  target: HandleTarget;
  /** `onOpened` ran for it, not declining (see {@link OpenIntent}). */
  opened: boolean;
}

/**
 * The open SQLite handles of one executor child, least recently used first.
 *
 * Ten thousand databases must not mean ten thousand open files (a WAL database holds three
 * descriptors: the file, its -wal and its -shm), so at most `size` stay open and the least
 * recently used is closed on the way in. Closing is safe at any time: statements run one at a
 * time and never span two requests.
 *
 * A handle whose `beforeClose` fails is kept open instead ("held"): closing the last connection
 * checkpoints the WAL into the file, and frames history had not copied yet would be gone from
 * it for good, so restores to those moments would answer without acknowledged writes (issue
 * 25: a full disk, then a restart). Held handles are tried again at most once a second, on the
 * way into {@link open}, and a process that exits with one held (`process.exit`, as the executor
 * child does) leaves its WAL for whoever opens the database next, as a crash does; a Node process
 * that ends by its event loop running dry has better-sqlite3 close every handle still open,
 * checkpointing. {@link evict}, which a restore needs to be final, throws instead. A close whose
 * copy cannot have the write lock (another connection holds it past the busy timeout) fails the
 * same way: see `captureBeforeClose`.
 */
export class HandleCache {
  private readonly entries = new Map<string, Entry>();
  private readonly held = new Map<string, Entry>();
  private heldTriedAt = 0;
  private empty?: Database.Database;

  constructor(private readonly opts: HandleCacheOptions) {
    if (!Number.isInteger(opts.size) || opts.size < 1) throw new RangeError(`handle cache size must be a positive integer, got ${opts.size}`);
  }

  /** Handles open now (the shared empty database not counted). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The handle for `target`. For a read of a database that does not exist yet this is one
   * shared, empty in-memory database, so `SELECT 1` works and a table reads as `no such table`,
   * without creating a file.
   * @throws AgentDbError DATABASE_CORRUPT when the file is not a SQLite database (the file is
   * left exactly as it was).
   */
  open(target: HandleTarget, intent: OpenIntent): Database.Database {
    this.settle();
    const kept = this.held.get(target.path);
    if (kept) {
      // Back in use: its uncopied frames are the next capture's.
      this.held.delete(target.path);
      this.entries.set(target.path, kept);
    }
    if (this.held.size > 0 && Date.now() - this.heldTriedAt >= HELD_RETRY_MS) this.retryHeld();
    const hit = this.entries.get(target.path);
    if (hit) {
      // Re-insert so the Map's order stays least-recently-used first.
      this.entries.delete(target.path);
      this.entries.set(target.path, hit);
      if (!hit.opened && intent !== 'query') hit.opened = this.opts.onOpened?.(hit.db, hit.target, intent) !== false;
      return hit.db;
    }
    const db = openHandle(target.path, intent === 'write', this.opts);
    if (!db) return this.emptyDatabase();
    if (!this.opts.settleLater) this.trim(this.opts.size - 1);
    const entry: Entry = { db, shard: target.shard, target, opened: true };
    this.entries.set(target.path, entry);
    entry.opened = this.opts.onOpened?.(db, target, intent) !== false;
    return db;
  }

  /**
   * Closes the least recently used handles past `size`: what {@link open} left for later
   * (`settleLater`). Never throws: it runs once the answer is sent, with no request to fail.
   */
  settle(): void {
    try {
      this.trim(this.opts.size);
    } catch {
      // A close that threw (a copy that fails holds its handle instead, without throwing) left
      // the cache as one in `open` did, where it failed that request.
    }
  }

  /** Whether the database at `dbPath` has a handle open now. */
  isOpen(dbPath: string): boolean {
    return this.entries.has(dbPath) || this.held.has(dbPath);
  }

  /** The handle open for `dbPath`, if any, without using it (it stays where it is in the order). */
  peek(dbPath: string): Database.Database | undefined {
    return (this.entries.get(dbPath) ?? this.held.get(dbPath))?.db;
  }

  /**
   * Closes the handle of `dbPath` without `beforeClose` (history's copy before a close): for a
   * handle whose WAL was deleted under it, once what it committed is put back in the file (see
   * `dead-wal.ts`); a copy would fail on it, and the handle would be held for good.
   */
  discard(dbPath: string): void {
    const entry = this.entries.get(dbPath) ?? this.held.get(dbPath);
    if (!entry) return;
    this.entries.delete(dbPath);
    this.held.delete(dbPath);
    forgetStatements(entry.db);
    entry.db.close();
    this.opts.afterClose?.(entry.target, undefined);
  }

  /** Handles kept open because history could not copy their WAL before closing. */
  get heldOpen(): number {
    return this.held.size;
  }

  /**
   * True for the stand-in {@link open} returns when a database does not exist yet: nothing may
   * ever be written to it (it is shared by every such read).
   */
  isPlaceholder(db: Database.Database): boolean {
    return db === this.empty;
  }

  /**
   * Closes the handle of one database, if open (after it reported corruption, or a restore).
   * @throws what `beforeClose` threw; the handle then stays open (a restore must not go on as if
   * the file were closed, nor close it with frames history lacks).
   */
  evict(dbPath: string): void {
    const kept = this.held.get(dbPath);
    if (kept) {
      this.held.delete(dbPath);
      this.entries.set(dbPath, kept);
    }
    if (this.entries.has(dbPath)) this.closeOne(dbPath, 'throw');
  }

  /**
   * Closes every handle of these shards: their lease was lost, and another worker may own the
   * files from now on. Returns how many were closed.
   */
  evictShards(shards: readonly number[]): number {
    const gone = new Set(shards);
    let closed = 0;
    for (const [key, entry] of [...this.entries]) {
      if (!gone.has(entry.shard)) continue;
      if (this.closeOne(key)) closed++;
    }
    return closed;
  }

  /**
   * Closes everything it can; the cache stays usable. A handle whose WAL history could not copy
   * stays held (see {@link HandleCache}): a process about to exit leaves that WAL as it is.
   */
  closeAll(): void {
    for (const key of [...this.entries.keys()]) this.closeOne(key);
    this.retryHeld();
    if (this.empty) forgetStatements(this.empty);
    this.empty?.close();
    this.empty = undefined;
  }

  private emptyDatabase(): Database.Database {
    if (!this.empty) {
      this.empty = new Database(':memory:');
      hardenConnection(this.empty);
    }
    return this.empty;
  }

  /** Closes held handles whose WAL history can copy now. */
  private retryHeld(): void {
    this.heldTriedAt = Date.now();
    for (const [key, entry] of [...this.held]) {
      this.held.delete(key);
      this.entries.set(key, entry);
      this.closeOne(key);
    }
  }

  /** Closes the least recently used handles until at most `size` are open. */
  private trim(size: number): void {
    while (this.entries.size > size) this.closeOne(this.entries.keys().next().value!);
  }

  /** Closes one handle; false when `beforeClose` failed and the handle is held open instead. */
  private closeOne(key: string, onFailure: 'hold' | 'throw' = 'hold'): boolean {
    const entry = this.entries.get(key);
    this.entries.delete(key);
    if (!entry) return false;
    // Its statements die with it; they must not go on counting against the cache's budget.
    forgetStatements(entry.db);
    let token: unknown;
    try {
      token = this.opts.beforeClose?.(entry.db, entry.target, entry.opened);
    } catch (err) {
      if (onFailure === 'throw') {
        this.entries.set(key, entry);
        throw err;
      }
      this.held.set(key, entry);
      return false;
    }
    // Closing the last connection checkpoints the WAL and removes -wal and -shm.
    entry.db.close();
    this.opts.afterClose?.(entry.target, token);
    return true;
  }
}
