import { AgentDbError } from '../errors.ts';
import { closeWal, walDeleted } from '../history/capture-connection.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import { lockHolders } from '../sqlite/lock-holders.ts';

/**
 * Puts back in the database file what this child's connection committed after its WAL was
 * deleted under it, by closing that connection; false when its WAL is where it was.
 *
 * A connection elsewhere that takes itself for a database's last (a program that ignores this
 * child's locks) checkpoints and deletes the WAL at its close; this child's connection goes on
 * committing into the deleted file, which no other process sees (session 30, G8). Capture copies
 * those commits into history and finds the WAL gone (`walDeleted`), and the handle was held open
 * for good (history's copy before a close fails on it), so until the child exited every write
 * was answered ok into a file no other process reads, and its exit lost them from the database
 * (session 31, F8's leftover). A user expects a write answered ok to be in the database. Closing
 * the connection as SQLite does, the last of the database's connections, checkpoints the dead WAL
 * into the file (the file itself was not deleted) and removes the -wal and -shm at its path;
 * history already holds every commit, so its copy before the close is skipped. Then the request
 * opens the database afresh. A second connection in this process cannot copy the pages instead:
 * SQLite shares one WAL index per database file within a process, the dead one.
 * @throws AgentDbError UNAVAILABLE while another process holds the database open: its close
 * would not checkpoint (it cannot be the last), and the commits would be lost; nothing is written.
 */
export function putBackDeadWal(handles: HandleCache, dbPath: string): boolean {
  const db = handles.peek(dbPath);
  if (!db || !walDeleted(db)) return false;
  // The file's lock (a WAL connection keeps SHARED while open), and the -shm now at its path (a
  // connection opened since the deletion).
  const holders = new Set([...(lockHolders(dbPath) ?? []), ...(lockHolders(`${dbPath}-shm`) ?? [])]);
  const others = [...holders].filter((pid) => pid !== process.pid);
  if (others.length > 0)
    throw new AgentDbError(
      'UNAVAILABLE',
      `the WAL of this database was deleted under agentdb's connection by another program; what agentdb committed since is in its history and will be put back in the file once no other process has the database open (process ${others.join(', ')} has it now): nothing was written`,
    );
  closeWal(db);
  handles.discard(dbPath);
  return true;
}
