import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { readWalIndex } from './wal-index.ts';

/** The WAL file's header, and each frame's header before its page (sqlite.org/walformat.html). */
const WAL_HEADER = 32;
const FRAME_HEADER = 24;

/**
 * Cuts the WAL of `dbPath` back to its last committed frame, after a write on `db` failed on a full
 * disk. SQLite can write a transaction's every frame, its commit frame included, and then fail to
 * enter them in the WAL index (its -shm cannot grow: SQLITE_IOERR_SHMSIZE): the write fails, and
 * this connection writes its next transaction over those frames. But a connection that recovers
 * the WAL from the file first (this child SIGKILLed, or dead with its worker, before another
 * write) finds frames that chain and check like any commit, and the write answered STORAGE_FULL,
 * "nothing was written", is committed after all (session 31, F8's fault ledger: runs 3 and 5; G7
 * found the frames, and kept them out of history). Under the write lock, so no connection is
 * appending frames meanwhile; readers read no frame past the index's end. Never throws: the
 * failure is answered either way.
 */
export function cutUncommittedTail(db: Database, dbPath: string): void {
  // Tests only: the child dies between SQLite's failed commit and this cut, as a SIGKILL from
  // outside may have it (the next open cuts then: `unentered-tail.ts`). Unset in production.
  if (process.env.AGENTDB_TEST_KILL_BEFORE_TAIL_CUT === '1') {
    // Counted by the fault ledger (it reads the worker's log, which this child's stderr is).
    process.stderr.write(`agentdb test hook: SIGKILL before the tail cut of ${dbPath}\n`);
    process.kill(process.pid, 'SIGKILL');
  }
  if (db.inTransaction) return;
  try {
    db.exec('BEGIN IMMEDIATE');
  } catch {
    return;
  }
  try {
    const index = readWalIndex(db, dbPath);
    if (!index) return;
    const wal = `${dbPath}-wal`;
    const end = WAL_HEADER + index.lastFrame * (index.pageSize + FRAME_HEADER);
    const size = fs.statSync(wal, { throwIfNoEntry: false })?.size ?? 0;
    // SQLite's own lock is on the database file and the -shm, not the -wal: opening and closing
    // the -wal here lets go of none of them.
    if (size > end) fs.truncateSync(wal, end);
  } catch {
    // Left as it was: the next write on this connection writes over the tail.
  } finally {
    try {
      db.exec('ROLLBACK');
    } catch {
      // Nothing was begun that needs ending.
    }
  }
}
