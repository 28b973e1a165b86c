import fs from 'node:fs';

/**
 * The processes holding a POSIX lock on `file` (any byte), read from /proc/locks (Linux): an open
 * SQLite connection holds one on its database's file while in a transaction and one on its -shm
 * (the DMS byte) while open. Undefined when it cannot be known (not Linux, no such file).
 */
export function lockHolders(file: string): Set<number> | undefined {
  let id: string;
  let locks: string;
  try {
    id = lockId(fs.statSync(file, { bigint: true }));
    locks = fs.readFileSync('/proc/locks', 'latin1');
  } catch {
    return undefined;
  }
  // "1: POSIX  ADVISORY  READ 1234 00:2a:5678 128 128": the pid, then major:minor:inode.
  const holders = new Set<number>();
  for (const line of locks.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const at = fields.indexOf(id);
    if (at > 0) holders.add(Number(fields[at - 1]));
  }
  return holders;
}

/**
 * How /proc/locks names a file: its device's major and minor in hex (`%02x`), then its inode. The
 * device matters: inodes repeat across file systems, and two tmpfs mounts number theirs alike
 * from the start, so a lock on another mount's file of the same inode read as this one's holder
 * (a -shm taken as connected: `cutUnenteredTail` then cut nothing, and a write answered as failed
 * was in the database after the next open; seen with a second tmpfs of SQLite files in use).
 */
function lockId(stat: fs.BigIntStats): string {
  // glibc's dev_t encoding (gnu_dev_major/minor), as libuv's makedev made it.
  const major = ((stat.dev >> 8n) & 0xfffn) | ((stat.dev >> 32n) & ~0xfffn);
  const minor = (stat.dev & 0xffn) | ((stat.dev >> 12n) & ~0xffn);
  const hex = (n: bigint) => n.toString(16).padStart(2, '0');
  return `${hex(major)}:${hex(minor)}:${stat.ino}`;
}
