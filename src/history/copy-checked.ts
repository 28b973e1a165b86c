import fs from 'node:fs';
import { copyOnThread } from './copy-worker.ts';
import { hashOnThread, hashedOrUndefined } from './hash-worker.ts';
import { verifyIntegrity } from './restore-engine.ts';
import { hashAndSync, syncFile } from './snapshot.ts';

/** What {@link copyChecked} found: the rebuilt file's sha256 and size (it and the copy are synced). */
export interface Checked {
  sha256: string;
  bytes: number;
}

/**
 * Copies a restore's rebuilt file `rebuilt` to `copy` and syncs both, while this thread runs
 * `PRAGMA integrity_check` on it: the copy becomes the live database, `rebuilt` the new
 * generation's snapshot. On 100 MB the check, the copy and the sha256 each cost about the same,
 * so the copy (with its fsync) and the hash (with the rebuilt file's fsync) run on two threads
 * meanwhile. Neither file is used before all three are done: a file that fails the check is
 * removed with its copy.
 *
 * A thread failing to start or answer costs only doing its work here afterwards.
 * @throws AgentDbError HISTORY_CORRUPT when SQLite finds the rebuilt file damaged (both removed).
 */
export function copyChecked(rebuilt: string, copy: string): Checked {
  const stamp = stampOf(rebuilt);
  const copying = copyOnThread(rebuilt, copy);
  const hashing = hashOnThread(rebuilt, true);
  let copied = false;
  try {
    try {
      verifyIntegrity(rebuilt);
    } finally {
      // The thread must be done with the copy before anything removes or renames it.
      try {
        copying.result();
        copied = true;
      } catch {
        copied = false;
      }
    }
    let hashed = hashedOrUndefined(hashing);
    if (!copied || stampOf(rebuilt) !== stamp) {
      // No copy from the thread, or something wrote the file meanwhile (nothing should: the
      // check only reads): the copy and the hash may not be of the same bytes. Both again, here.
      fs.copyFileSync(rebuilt, copy);
      syncFile(copy);
      hashed = undefined;
    }
    if (!hashed || hashed.bytes !== fs.statSync(rebuilt).size) hashed = hashAndSync(rebuilt);
    return hashed;
  } catch (err) {
    fs.rmSync(copy, { force: true });
    fs.rmSync(rebuilt, { force: true });
    throw err;
  }
}

function stampOf(file: string): string {
  const st = fs.statSync(file, { bigint: true });
  return `${st.size}|${st.mtimeNs}|${st.ino}`;
}
