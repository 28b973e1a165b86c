import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import type { Delta } from './delta-restore.ts';
import type { PageRef } from './frame-scan.ts';
import { syncDir } from './file-sync.ts';
import { lockHolders } from '../sqlite/lock-holders.ts';
import { writeWal } from './wal-writer.ts';

// A delta restore's one commit, written as the database's -wal: whole and synced beside it, then
// linked in (why: see `delta-restore.ts`).

/**
 * What {@link writeDeltaWal} did: nothing to write, the commit put in place, a -wal already
 * there (another connection), or none put in place because the file system has no hard links.
 */
export type DeltaWritten = 'unchanged' | 'written' | 'busy' | 'unlinkable';

/** The file a delta's WAL is written to before it is linked in as `<db>-wal` (a crashed restore's is removed as a leftover). */
export function deltaWalTemp(dbPath: string): string {
  return `${dbPath}.restore-${process.pid}.wal.tmp`;
}

/**
 * Writes `delta` as `<dbPath>-wal`, one commit with these 8 bytes of salts, synced with its
 * folder: written whole and synced beside the database first, then linked in, so that no
 * connection can ever find part of it. 'unchanged' (nothing written) when the database at the
 * moment equals the live one; 'busy' (nothing written) when a -wal is already there: a
 * connection has the database open.
 */
export function writeDeltaWal(dbPath: string, delta: Delta, salts: Buffer = randomBytes(8)): DeltaWritten {
  const pages = [...delta.write.keys()].sort((x, y) => x - y);
  if (pages.length === 0) {
    if (delta.pagesAt === delta.pagesNow) return 'unchanged';
    // Only a shorter file: a commit needs a frame, page 1 as it was will do.
    pages.push(1);
    delta.write.set(1, delta.write.get(1) ?? { file: dbPath, offset: 0 });
  }
  const tmp = deltaWalTemp(dbPath);
  const fd = fs.openSync(tmp, 'w');
  const reader = new PageReader();
  try {
    try {
      writeWal(fd, delta.pageSize, pages, delta.pagesAt, salts, (p, into) => reader.read(delta.write.get(p)!, into));
      fs.fsyncSync(fd);
    } finally {
      reader.close();
      fs.closeSync(fd);
    }
    // A link, unlike a rename, never replaces: a -wal made since the restore found none (a
    // connection opened the database) stays, and this commit is not written.
    try {
      fs.linkSync(tmp, `${dbPath}-wal`);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return 'busy';
      // Some mounts (FUSE, SMB) refuse links: the caller restores the other way, by rename.
      if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ENOSYS') return 'unlinkable';
      throw err;
    }
    syncDir(path.dirname(dbPath));
    return 'written';
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/**
 * Takes back the commit {@link writeDeltaWal} linked in as `<dbPath>-wal` (these `salts` in its
 * header) while no connection has read it: none anywhere holds a lock on the -shm (every WAL-mode
 * connection holds one while open). The first open over it failed (on a full disk SQLite's
 * recovery could not grow the -shm), so the restore answers a failure; left there, the next open
 * with room recovers the commit and the restore lands after all (session 33, F10). Returns
 * whether the -wal is gone; never throws (the restore's own failure is answered either way).
 */
export function takeBackDeltaWal(dbPath: string, salts: Buffer): boolean {
  const wal = `${dbPath}-wal`;
  const shm = `${dbPath}-shm`;
  try {
    const head = Buffer.alloc(24);
    const fd = fs.openSync(wal, 'r');
    try {
      if (fs.readSync(fd, head, 0, 24, 0) < 24 || !head.subarray(16, 24).equals(salts.subarray(0, 8))) return false;
    } finally {
      fs.closeSync(fd);
    }
    const holders = fs.existsSync(shm) ? lockHolders(shm) : new Set<number>();
    if (holders === undefined || holders.size > 0) return false;
    fs.rmSync(wal);
    // The index SQLite began (its first bytes): no connection maps it, the next open starts afresh.
    fs.rmSync(shm, { force: true });
    syncDir(path.dirname(dbPath));
    return true;
  } catch {
    return false;
  }
}

/** Reads pages out of segment and snapshot files, each opened once. */
class PageReader {
  private readonly fds = new Map<string, number>();

  read(ref: PageRef, into: Buffer): void {
    let fd = this.fds.get(ref.file);
    if (fd === undefined) {
      fd = fs.openSync(ref.file, 'r');
      this.fds.set(ref.file, fd);
    }
    const n = fs.readSync(fd, into, 0, into.length, ref.offset);
    if (n !== into.length) throw new AgentDbError('HISTORY_CORRUPT', `${path.basename(ref.file)} is shorter than its history says`);
  }

  close(): void {
    for (const fd of this.fds.values()) fs.closeSync(fd);
    this.fds.clear();
  }
}
