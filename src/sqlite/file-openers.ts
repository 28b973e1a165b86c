import fs from 'node:fs';
import path from 'node:path';

/**
 * Whether a process other than this one has `file` open (a descriptor on it), read from
 * /proc/<pid>/fd (Linux). A SQLite connection opens its database's file at once but its -wal and
 * -shm only at its first read, and takes no lock until then: one opened and not used yet (the
 * `sqlite3` shell at its prompt, a program's pool made at start-up) leaves no trace but this.
 * Renamed over, such a connection goes on with the old file's inode, beside the new file's -wal
 * and -shm, which it then opens by name (session 36, F15). False when it cannot be told (not
 * Linux); a process whose descriptors cannot be read (another user's, without the right) is not
 * seen, as none of its connections' locks would be missing from /proc/locks either.
 */
export function openedElsewhere(file: string): boolean {
  let target: fs.Stats;
  let pids: string[];
  try {
    target = fs.statSync(file);
    pids = fs.readdirSync('/proc').filter((n) => /^[0-9]+$/.test(n) && Number(n) !== process.pid);
  } catch {
    return false;
  }
  // The link's text names the file as its process sees it: compared by name first (cheap), then
  // by device and inode (another mount namespace names it otherwise; a name alike may be another file).
  const base = path.basename(file);
  for (const pid of pids) {
    const dir = `/proc/${pid}/fd`;
    let fds: string[];
    try {
      fds = fs.readdirSync(dir);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const link = fs.readlinkSync(`${dir}/${fd}`);
        if (!link.endsWith(base) && !link.endsWith(`${base} (deleted)`)) continue;
        const st = fs.statSync(`${dir}/${fd}`);
        if (st.dev === target.dev && st.ino === target.ino) return true;
      } catch {
        // Closed meanwhile, or the process exited.
      }
    }
  }
  return false;
}
