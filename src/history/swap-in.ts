import Database from 'better-sqlite3';

interface NativeBackup {
  transfer(pages: number): { totalPages: number; remainingPages: number };
  close(): void;
}

/**
 * Copies the database in `fromFile` over the live database `liveFile`, page for page, with
 * SQLite's backup API, as one write transaction of the live database: it goes through the live
 * WAL like any commit, so connections other executor children hold on the file see the new
 * state (the backup bumps the schema cookie, so their prepared statements are prepared again),
 * and history capture copies it like any other commit.
 *
 * Synchronous on purpose: it runs inside the executor child between two statements of the
 * database, where nothing may interleave. better-sqlite3's `backup()` is asynchronous (one step
 * per event-loop turn), so this drives the same native backup object it uses, all pages in one
 * step; pinned by `test/integration/history-restore.test.ts`.
 * @throws Error from SQLite (SQLITE_BUSY after retries, SQLITE_READONLY …).
 */
export function swapIn(fromFile: string, liveFile: string): void {
  // Not read-only: a WAL-mode file opened read-only needs its -shm to exist already.
  const src = new Database(fromFile, { fileMustExist: true });
  try {
    const native = nativeHandle(src);
    const backup = native.backup(src, 'main', liveFile, false);
    try {
      for (let attempt = 0; ; attempt++) {
        const progress = backup.transfer(-1);
        if (progress.remainingPages === 0) break;
        // SQLITE_BUSY: another connection holds a lock for a moment.
        if (attempt > 200) throw new Error(`could not restore into ${liveFile}: the database stayed locked`);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 25);
      }
    } finally {
      backup.close();
    }
  } finally {
    src.close();
  }
}

interface NativeDatabase {
  backup(db: unknown, attached: string, dest: string, unlink: boolean): NativeBackup;
}

/**
 * better-sqlite3's native handle, kept under a private symbol property of each Database. Its
 * util module exported the symbol until 13, whose package exports no longer reach it; the
 * instance's own symbol-keyed property is the one with the native `backup`.
 * @throws Error when no such property is there (a better-sqlite3 this was not written for).
 */
function nativeHandle(db: Database.Database): NativeDatabase {
  for (const symbol of Object.getOwnPropertySymbols(db)) {
    const value = (db as unknown as Record<symbol, unknown>)[symbol];
    if (value && typeof (value as NativeDatabase).backup === 'function') return value as NativeDatabase;
  }
  throw new Error('better-sqlite3 keeps no native database handle this restore knows how to reach');
}
