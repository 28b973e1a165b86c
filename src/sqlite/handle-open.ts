import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { hardenConnection } from '../guard/engine-check.ts';
import { AgentDbError } from '../errors.ts';
import type { HandleCacheOptions } from './handle-cache.ts';
import { cutUnenteredTail } from './unentered-tail.ts';

/**
 * Opens the database at `file` as a handle of the cache (`HandleCache`, on a miss: no connection
 * of this process has it open, the executor child opening live databases only there), in WAL
 * mode with the cache's settings. With `create`, a database that does not exist is made (only
 * writes and drops create one); without, undefined for it.
 * @throws AgentDbError DATABASE_CORRUPT when the file is not a SQLite database (left as it was).
 */
export function openHandle(
  file: string,
  create: boolean,
  opts: Pick<HandleCacheOptions, 'busyTimeoutMs' | 'walAutocheckpoint' | 'pageCacheKiB'>,
): Database.Database | undefined {
  // A dead process's commit its WAL index never entered must not come back as one when this open
  // rebuilds the index (`unentered-tail.ts`).
  cutUnenteredTail(file);
  const db = create ? openForWrite(file, opts.busyTimeoutMs) : openExisting(file, opts.busyTimeoutMs);
  if (db) configure(db, file, opts);
  return db;
}

function openForWrite(file: string, busyTimeoutMs = 5000): Database.Database {
  // Only on a miss, and only for writes: the folder of a database that was never written
  // does not exist.
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return new Database(file, { timeout: busyTimeoutMs });
}

function openExisting(file: string, busyTimeoutMs = 5000): Database.Database | undefined {
  try {
    return new Database(file, { fileMustExist: true, timeout: busyTimeoutMs });
  } catch (err) {
    // better-sqlite3 says so with SQLITE_CANTOPEN, or a TypeError when the folder is missing;
    // either also covers a file that exists but cannot be opened, and only absence is empty.
    if (!fs.existsSync(file)) return undefined;
    throw err;
  }
}

function configure(db: Database.Database, file: string, opts: Pick<HandleCacheOptions, 'walAutocheckpoint' | 'pageCacheKiB'>): void {
  try {
    hardenConnection(db);
    // The first statement that reads the header: a file that is not SQLite fails here with
    // SQLITE_NOTADB, before anything could be written to it.
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (mode !== 'wal') throw new Error(`could not switch ${file} to WAL (journal_mode is ${String(mode)})`);
    // The connection's own settings, in one exec: a statement object each took 0.06 ms more of
    // a miss's open with hardenConnection's (issue 31). With history capture on, only capture
    // checkpoints, once it has copied the frames.
    const checkpoint = opts.walAutocheckpoint === undefined ? '' : `PRAGMA wal_autocheckpoint = ${Number(opts.walAutocheckpoint)}; `;
    db.exec(`PRAGMA synchronous = NORMAL; ${checkpoint}PRAGMA cache_size = -${Number(opts.pageCacheKiB ?? 1024)}`);
  } catch (err) {
    db.close();
    const code = (err as { code?: string }).code ?? '';
    if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) {
      throw new AgentDbError('DATABASE_CORRUPT', `${(err as Error).message} (database file left untouched)`);
    }
    throw err;
  }
}
