import path from 'node:path';
import fs from 'node:fs';
import { CALL_ID_LEDGER_DIR, WORKSPACE_FILE } from '../contracts/database-id.ts';
import { dirNames } from './dir-names.ts';
import { HISTORY_ROOT } from './history-files.ts';
import { workspaceMoments } from './as-of-cache.ts';
import { fileBytesOnce } from './history-bytes.ts';

/** What one workspace's databases take in the data folder. */
export interface WorkspaceDiskUse {
  /** Its databases (ids), forks included, on every shard. */
  readonly databases: string[];
  /** Their files: the database, its `-wal` and `-shm`, a restore's temp file. */
  readonly databaseBytes: number;
  /** Their point-in-time history (`history/<workspace>/`), each linked file once. */
  readonly historyBytes: number;
  /** Its call-id ledger (`call-ids/<workspace>.sqlite`, with `-wal` and `-shm`): it grows with its calls' own ids. */
  readonly ledgerBytes: number;
  /** Past moments kept for reads' `as_of` (`as-of/<workspace>/`): dropped when the quota needs their room. */
  readonly momentBytes: number;
}

/**
 * Files (and folder entries) a paced walk looks at between two turns of the event loop: about
 * half a millisecond of `statSync` calls on a quiet machine. The worker walks a workspace for its byte quota (every 5 s
 * per writing workspace, `WorkspaceQuota.writesRefusal`); one of 20,000 files walked in one go
 * held its event loop, and every other workspace's calls on it, for the whole walk (review L2).
 */
export const WALK_ENTRIES_PER_TURN = 128;

/**
 * Walks the data folder for `workspace`: its databases on every shard (`shards/<n>/<workspace>/`,
 * one data folder for every worker: whichever takes a shard's lease opens its files there) and
 * its history. A walk, not a running total: it is asked before a step that creates a database
 * (a fork, a first write), every 5 s per writing workspace, and by `agentdb usage`. A file linked
 * under both (a fork's first snapshot is its source's) counts once. In one go: for a test or a
 * command; a worker walks with {@link workspaceDiskUsePaced}.
 */
export function workspaceDiskUse(dataDir: string, workspace: string): WorkspaceDiskUse {
  const walk = walkWorkspace(dataDir, workspace);
  for (let step = walk.next(); ; step = walk.next()) if (step.done) return step.value;
}

/**
 * {@link workspaceDiskUse}, letting the event loop turn after every {@link WALK_ENTRIES_PER_TURN}
 * entries, so a workspace of many files never holds the worker's other calls for its whole walk.
 * The figures are what the files held as each was looked at: a file written during the walk
 * counts as it was then, as it did in one go, only over a longer stretch (a few milliseconds per
 * thousand files).
 */
export async function workspaceDiskUsePaced(dataDir: string, workspace: string): Promise<WorkspaceDiskUse> {
  const walk = walkWorkspace(dataDir, workspace);
  for (let step = walk.next(); ; step = walk.next()) {
    if (step.done) return step.value;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** The walk itself, pausing (a `yield`) after every {@link WALK_ENTRIES_PER_TURN} entries. */
function* walkWorkspace(dataDir: string, workspace: string): Generator<void, WorkspaceDiskUse> {
  const seen = new Set<string>();
  const pace = { left: WALK_ENTRIES_PER_TURN };
  const databases: string[] = [];
  let databaseBytes = 0;
  const shardsRoot = path.join(dataDir, 'shards');
  for (const shard of dirNames(shardsRoot)) {
    const dir = path.join(shardsRoot, shard, workspace);
    databaseBytes += yield* folderBytesPaced(dir, seen, pace);
    for (const file of dirNames(dir)) {
      if (!file.endsWith('.sqlite')) continue;
      databases.push(file === WORKSPACE_FILE ? workspace : `${workspace}/${file.slice(0, -'.sqlite'.length)}`);
    }
  }
  const historyBytes = yield* folderBytesPaced(path.join(dataDir, HISTORY_ROOT, workspace), seen, pace);
  let ledgerBytes = 0;
  for (const end of ['', '-wal', '-shm']) {
    ledgerBytes += fs.statSync(path.join(dataDir, CALL_ID_LEDGER_DIR, `${workspace}.sqlite${end}`), { throwIfNoEntry: false })?.size ?? 0;
  }
  const momentBytes = yield* folderBytesPaced(workspaceMoments(dataDir, workspace), seen, pace);
  return { databases: databases.sort(), databaseBytes, historyBytes, ledgerBytes, momentBytes };
}

/**
 * Bytes under `dir`, each file counted once (`seen`, device:inode, as `folderBytes` counts them:
 * a restore's generation links the snapshot it began from). The folder is read a few entries at
 * a time (`opendirSync`), so one of 20,000 files is not listed in one go either.
 */
function* folderBytesPaced(dir: string, seen: Set<string>, pace: { left: number }): Generator<void, number> {
  let handle: fs.Dir;
  try {
    handle = fs.opendirSync(dir);
  } catch {
    return 0;
  }
  let total = 0;
  try {
    for (let e = handle.readSync(); e !== null; e = handle.readSync()) {
      if (--pace.left <= 0) {
        pace.left = WALK_ENTRIES_PER_TURN;
        yield;
      }
      const p = path.join(dir, e.name);
      if (e.isDirectory()) total += yield* folderBytesPaced(p, seen, pace);
      else if (e.isFile()) total += fileBytesOnce(p, seen);
    }
  } catch {
    // The folder went away under the walk (a prune, a dropped moment): what was counted stands.
  } finally {
    handle.closeSync();
  }
  return total;
}
