import fs from 'node:fs';
import path from 'node:path';
import { historyDir } from './history-files.ts';

/** Free bytes below which a disk counts as the full one (as `diskIsFull`'s margin). */
const FULL_MARGIN = 1024 * 1024;

interface DiskState {
  dir: string;
  dev: number;
  free: number;
}

/**
 * Which disk a STORAGE_FULL refusal of a database is about, and what to do: history's folder
 * (AGENTDB_DATA_DIR/history, a disk of its own on some hosts) or the databases' folder. The
 * registry's "The server's disk is full" named neither: an operator whose history mount was full
 * freed room beside the databases, and the refusal stayed (session 37, F17's leftover). Asked
 * once the step failed: the disk below the margin is the full one; when neither is (room came
 * back meanwhile, or a quota), the one with less free. `historyOf`: the databases whose history
 * the step wrote (its own, and a fork's source). `paths` false: the folders are not named (an
 * agent's or a member's refusal: the server's layout is the operator's, and only an operator can
 * free room). Undefined when a folder cannot be read.
 */
export function fullDiskWhere(dataDir: string, db: { id: string; path: string }, historyOf: readonly string[] = [db.id], paths = true): string | undefined {
  // A restore into a new database writes the fork's history and closes the source's (its copy):
  // of their folders, the one with less room.
  const histories = historyOf.map((id) => stateOf(historyDir(dataDir, id)));
  if (histories.some((s) => !s)) return undefined;
  const history = (histories as DiskState[]).reduce((a, b) => (b.free < a.free ? b : a));
  const databases = stateOf(path.dirname(db.path));
  if (!history || !databases) return undefined;
  const at = (state: DiskState) => (paths ? ` (${state.dir})` : '');
  if (history.dev === databases.dev) {
    return `the disk that holds both the databases and their history${at(databases)} is full: free space on it, then try again`;
  }
  const historyFull = history.free < FULL_MARGIN;
  const databasesFull = databases.free < FULL_MARGIN;
  if (historyFull && databasesFull) {
    return `both the databases' disk${at(databases)} and history's disk${at(history)} are full: free space on both, then try again`;
  }
  const isHistory = historyFull || (!databasesFull && history.free < databases.free);
  return isHistory
    ? `history's disk${at(history)} is full, not the databases'${at(databases)}: free space on history's disk, then try again`
    : `the databases' disk${at(databases)} is full, not history's${at(history)}: free space on the databases' disk, then try again`;
}

/**
 * `detail` followed by {@link fullDiskWhere}'s words, in parentheses, when they can be told and
 * `detail` does not already carry them (an answer decorated in the child, passed on by a caller).
 */
export function withFullDisk(detail: string, dataDir: string, db: { id: string; path: string }, historyOf?: readonly string[], paths = true): string {
  if (/ (is|are) full(, not [^:]*)?: free space on/.test(detail)) return detail;
  const where = fullDiskWhere(dataDir, db, historyOf, paths);
  // SQLite's full disk comes with the mapper's generic words (`sqlite-errors.ts`): replaced by
  // which disk, not followed by it (the ledger read "… (the disk that holds the database is full)
  // (the disk that holds both …)", session 38, F19). Node's own words for a copy or write that
  // met ENOSPC name the files, two paths of internal names before the disk's words (F20's ledger).
  return where
    ? `${detail
        .replace(GENERIC, '')
        .replace(NODE_ENOSPC, 'no space left on the disk ($1)')
        .replace(/[.\s]+$/, '')} (${where})`
    : detail;
}

/** What `sqliteError` adds to SQLite's SQLITE_FULL, said better by {@link fullDiskWhere}. */
const GENERIC = / \(the disk that holds the database is full\)/;

/** Node's ENOSPC message (`ENOSPC: no space left on device, copyfile 'a' -> 'b'`): its call kept, its paths not. */
const NODE_ENOSPC = /ENOSPC: no space left on device, (\w+)(?: '[^']*')?(?: -> '[^']*')?/;

/** The folder itself or its nearest existing parent, with its device and free bytes. */
function stateOf(dir: string): DiskState | undefined {
  let at = path.resolve(dir);
  for (;;) {
    try {
      const dev = fs.statSync(at).dev;
      const st = fs.statfsSync(at);
      return { dir: at, dev, free: st.bavail * st.bsize };
    } catch {
      const up = path.dirname(at);
      if (up === at) return undefined;
      at = up;
    }
  }
}
