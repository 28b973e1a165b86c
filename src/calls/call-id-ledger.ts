import fs from 'node:fs';
import { CALL_ID_LEDGER_DIR } from '../contracts/database-id.ts';
import path from 'node:path';
import Database, { type Statement } from 'better-sqlite3';

/** What a call id was first used for, as the ledger keeps it (the same as a Redis claim's). */
export interface LedgerClaim {
  shard: number;
  database: string;
  fingerprint: string;
}

/** Options of a {@link CallIdLedger}. */
export interface CallIdLedgerOptions {
  /** `AGENTDB_DATA_DIR`: the ledger is `call-ids/<workspace>.sqlite` under it. */
  dataDir: string;
  /** How long a call id stays taken: a Redis claim's TTL (`claimTtlS`), in ms. */
  retentionMs: number;
  /** Told of a ledger that cannot be read or written (the call goes on with its Redis claim alone). */
  onError?: (workspace: string, err: unknown) => void;
  /** Open ledger files kept at most (least recently used closed first); default 64. */
  maxOpen?: number;
}

/** How often, at most, a ledger deletes what is past its retention (on a take). */
const PRUNE_EVERY_MS = 60 * 1000;

/**
 * The most entries one take deletes: a take runs on the worker's event loop, and a workspace
 * quiet past its retention after a burst (a pro plan's rate is 1,200 calls a minute, kept nine
 * days by default) left hundreds of thousands expired at once — 200,000 took 1.3 s to delete in
 * one statement, every tenant's calls on that worker stalled meanwhile. A take that deletes this
 * many prunes again on the next take, until the backlog is gone.
 */
export const PRUNE_BATCH = 500;

/**
 * How long a take waits for another process's. Each holds the file's write lock for one
 * statement (microseconds); a wait this long means a stuck process, and this runs on the
 * worker's event loop, so it gives up and the call goes on with its Redis claim alone.
 */
const BUSY_TIMEOUT_MS = 250;

interface Ledger {
  db: Database.Database;
  take: Statement;
  holder: Statement;
  release: Statement;
  prune: Statement;
  prunedAt: number;
}

/**
 * The call ids a workspace's callers used, kept on disk beside the data: a claim outlives a Redis
 * that comes back empty. The client claims a caller's own call id in Redis before it enqueues
 * (`claimCallId`), which is what refuses another call under a used id; Redis without AOF loses
 * those claims on a restart, and then a call under a used id reaching *another* database (another
 * scope: another file, shard and maybe worker), or a read (which leaves no exactly-once record),
 * ran as a new call, and the first call's own re-send was refused IDEMPOTENCY_CONFLICT although it
 * had run. The shard worker takes the id here too, before it runs the call: the first call's claim
 * stays, and any other call under the id is refused, whichever shard's worker runs it.
 *
 * One SQLite file per workspace (a call key names the caller inside it), opened by every worker
 * that runs the workspace's calls (WAL, so readers never wait; a take is one statement). Only
 * trivial statements on a primary key run here, so it runs in the worker, not an executor child.
 * Not fsynced per call (`synchronous=NORMAL`): it outlives Redis and process crashes; a power cut
 * may take its last moments, as it takes Redis's without AOF.
 */
export class CallIdLedger {
  private readonly open = new Map<string, Ledger>();
  private readonly maxOpen: number;

  constructor(private readonly opts: CallIdLedgerOptions) {
    this.maxOpen = opts.maxOpen ?? 64;
  }

  /**
   * Takes the caller's call id (`key`, see `callKey`) for `mine`, enqueued at `at`; or answers
   * the claim of the other call that holds it. A claim past the retention is taken over. Never
   * throws: a ledger that fails is reported to `onError` and the call goes on (undefined).
   */
  take(workspace: string, key: string, mine: LedgerClaim, at: number, now = Date.now()): LedgerClaim | undefined {
    try {
      const ledger = this.ledgerOf(workspace);
      const expired = now - this.opts.retentionMs;
      if (now - ledger.prunedAt >= PRUNE_EVERY_MS) {
        if (ledger.prune.run(expired, PRUNE_BATCH).changes < PRUNE_BATCH) ledger.prunedAt = now;
      }
      // One statement for a new id (the common case): it answers a row only when it wrote one.
      // Stepped to its end (all, not get): SQLite runs the WAL's autocheckpoint only when a
      // statement reaches SQLITE_DONE, and a RETURNING statement reset after its first row
      // commits without it; the hostile review's 20,000 takes left a 397 MB WAL never checkpointed.
      if (ledger.take.all(key, mine.fingerprint, mine.database, mine.shard, at, expired).length > 0) return undefined;
      const held = ledger.holder.get(key) as LedgerClaim | undefined;
      return held && held.fingerprint !== mine.fingerprint ? held : undefined;
    } catch (err) {
      this.opts.onError?.(workspace, err);
      return undefined;
    }
  }

  /**
   * Gives up the id `key` if `fingerprint`'s call holds it: that call ran nothing, because the
   * id was found to be another's where the ledger had no entry (a database's exactly-once record
   * of a call made before the ledger existed). Kept, it would refuse that first call's re-send.
   * Never throws (see {@link take}).
   */
  release(workspace: string, key: string, fingerprint: string): void {
    try {
      this.ledgerOf(workspace).release.run(key, fingerprint);
    } catch (err) {
      this.opts.onError?.(workspace, err);
    }
  }

  /** Closes every open ledger file (the worker stops). */
  close(): void {
    for (const ledger of this.open.values()) closeQuietly(ledger.db);
    this.open.clear();
  }

  private ledgerOf(workspace: string): Ledger {
    let ledger = this.open.get(workspace);
    if (ledger) {
      // Most recently used last: the first in the map is closed when too many are open.
      this.open.delete(workspace);
      this.open.set(workspace, ledger);
      return ledger;
    }
    const dir = path.join(this.opts.dataDir, CALL_ID_LEDGER_DIR);
    fs.mkdirSync(dir, { recursive: true });
    const db = new Database(path.join(dir, `${workspace}.sqlite`), { timeout: BUSY_TIMEOUT_MS });
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.exec(
        'CREATE TABLE IF NOT EXISTS call_ids (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, database TEXT NOT NULL, shard INTEGER NOT NULL, at INTEGER NOT NULL) WITHOUT ROWID;' +
          'CREATE INDEX IF NOT EXISTS call_ids_at ON call_ids (at);',
      );
      ledger = {
        db,
        take: db.prepare(
          'INSERT INTO call_ids (key, fingerprint, database, shard, at) VALUES (?, ?, ?, ?, ?) ' +
            'ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, database = excluded.database, shard = excluded.shard, at = excluded.at ' +
            'WHERE call_ids.at < ? RETURNING 1',
        ),
        holder: db.prepare('SELECT fingerprint, database, shard FROM call_ids WHERE key = ?'),
        release: db.prepare('DELETE FROM call_ids WHERE key = ? AND fingerprint = ?'),
        prune: db.prepare('DELETE FROM call_ids WHERE key IN (SELECT key FROM call_ids WHERE at < ? ORDER BY at LIMIT ?)'),
        prunedAt: 0,
      };
    } catch (err) {
      closeQuietly(db);
      throw err;
    }
    this.open.set(workspace, ledger);
    if (this.open.size > this.maxOpen) {
      const [oldest, kept] = this.open.entries().next().value!;
      this.open.delete(oldest);
      closeQuietly(kept.db);
    }
    return ledger;
  }
}

function closeQuietly(db: Database.Database): void {
  try {
    db.close();
  } catch {
    // Closing is housekeeping: a file that fails to close is left to the process's end.
  }
}
