import path from 'node:path';
import fs from 'node:fs';
import { CALL_ID_LEDGER_DIR, WORKSPACE_FILE } from '../contracts/database-id.ts';
import { dirNames } from './dir-names.ts';
import { folderBytes } from './history-bytes.ts';
import { HISTORY_ROOT } from './history-files.ts';
import { workspaceMoments } from './as-of-cache.ts';

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
 * Walks the data folder for `workspace`: its databases on every shard (`shards/<n>/<workspace>/`,
 * one data folder for every worker: whichever takes a shard's lease opens its files there) and
 * its history. A walk, not a running total: it is asked before a step that creates a database
 * (a fork, a first write) and by `agentdb usage`, never per call. A file linked under both (a
 * fork's first snapshot is its source's) counts once.
 */
export function workspaceDiskUse(dataDir: string, workspace: string): WorkspaceDiskUse {
  const seen = new Set<string>();
  const databases: string[] = [];
  let databaseBytes = 0;
  const shardsRoot = path.join(dataDir, 'shards');
  for (const shard of dirNames(shardsRoot)) {
    const dir = path.join(shardsRoot, shard, workspace);
    databaseBytes += folderBytes(dir, seen);
    for (const file of dirNames(dir)) {
      if (!file.endsWith('.sqlite')) continue;
      databases.push(file === WORKSPACE_FILE ? workspace : `${workspace}/${file.slice(0, -'.sqlite'.length)}`);
    }
  }
  const historyBytes = folderBytes(path.join(dataDir, HISTORY_ROOT, workspace), seen);
  let ledgerBytes = 0;
  for (const end of ['', '-wal', '-shm']) {
    ledgerBytes += fs.statSync(path.join(dataDir, CALL_ID_LEDGER_DIR, `${workspace}.sqlite${end}`), { throwIfNoEntry: false })?.size ?? 0;
  }
  const momentBytes = folderBytes(workspaceMoments(dataDir, workspace), seen);
  return { databases: databases.sort(), databaseBytes, historyBytes, ledgerBytes, momentBytes };
}
