import fs from 'node:fs';

/**
 * The processes holding a POSIX lock on `file` (any byte), read from /proc/locks (Linux): an open
 * SQLite connection holds one on its database's file while in a transaction and one on its -shm
 * (the DMS byte) while open. Undefined when it cannot be known (not Linux, no such file).
 */
export function lockHolders(file: string): Set<number> | undefined {
  let ino: number;
  let locks: string;
  try {
    ino = fs.statSync(file).ino;
    locks = fs.readFileSync('/proc/locks', 'latin1');
  } catch {
    return undefined;
  }
  // "1: POSIX  ADVISORY  READ 1234 00:2a:5678 128 128": the pid, then major:minor:inode.
  const holders = new Set<number>();
  const tail = `:${ino}`;
  for (const line of locks.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const at = fields.findIndex((f) => f.endsWith(tail) && f.split(':').length === 3);
    if (at > 0) holders.add(Number(fields[at - 1]));
  }
  return holders;
}
