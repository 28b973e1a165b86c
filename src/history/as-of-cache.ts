// A read's `as_of` (issue 29) reads a past moment from a file restored there, kept a while for
// the next read of the same moment. The layout, `<dataDir>/as-of/<workspace>/<agent|_workspace>/
// <generation>.<segment>.<frames>.sqlite`, is what the cache needs:
// - named by the exact history position the moment resolves to (`momentKey`), so two times
//   within one commit share one file, and a file once built never changes: children of any
//   worker may build the same one at once (each into its own temporary name, then a rename),
//   and every reader of it sees the same bytes;
// - one folder per workspace, so its disk use is one walk (`workspaceDiskUse` counts it against
//   the workspace's quota) and dropping every moment of a workspace for room is one `rm`;
// - outside `history/`, which prune, backups and restores walk: none of them must take a
//   moment's file for history.
// A file's modification time is its last use: the sweep drops files unused for AS_OF_KEEP_MINUTES.
import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { dirNames } from './dir-names.ts';
import { folderBytes } from './history-bytes.ts';
import { WORKSPACE_HISTORY } from './history-files.ts';
import { buildRestore } from './restore-rebuild.ts';
import type { RestorePlan } from './restore-plan.ts';
import { momentKey } from './as-of-moment.ts';
import { writeAll } from './write-all.ts';

/** The folder under AGENTDB_DATA_DIR that holds materialised moments. */
export const AS_OF_ROOT = 'as-of';

/** A database header's format versions (bytes 18 and 19) for the rollback journal: 1, 1. */
const LEGACY_FORMAT = Buffer.from([1, 1]);

/** A moment's file as {@link momentFile} found or made it. */
export interface MomentFile {
  file: string;
  /** Made by this call (restored from history), not found built. */
  materialised: boolean;
}

/** The folder of one workspace's moments. */
export function workspaceMoments(dataDir: string, workspace: string): string {
  return path.join(path.resolve(dataDir), AS_OF_ROOT, workspace);
}

/** Where the moment `plan` restores of database `id` is kept. */
export function momentPath(dataDir: string, id: string, plan: RestorePlan): string {
  const [workspace, agent] = id.split('/');
  return path.join(workspaceMoments(dataDir, workspace!), agent ?? WORKSPACE_HISTORY, `${momentKey(plan)}.sqlite`);
}

/** The bytes a moment's file will take: the database's size then. */
export function momentBytes(plan: RestorePlan): number {
  return plan.dbPages * plan.snapshot.pageSize;
}

/**
 * The file of a moment, built from history by the restore's own `buildRestore` when it is not
 * kept yet and `build` allows it; undefined when it is not kept and `build` is false (the
 * caller checks the workspace's quota first). A file found is marked used now.
 * @throws AgentDbError HISTORY_CORRUPT (what `buildRestore` throws), STORAGE_FULL.
 */
export function momentFile(dataDir: string, id: string, plan: RestorePlan, build: boolean): MomentFile | undefined {
  const file = momentPath(dataDir, id, plan);
  const now = new Date();
  try {
    fs.utimesSync(file, now, now);
    return { file, materialised: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (!build) return undefined;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  try {
    buildRestore(plan, tmp);
    // Out of WAL mode, so that read-only connections need no -wal or -shm beside it: the header's
    // read and write format versions (bytes 18 and 19) go from 2 (WAL) to 1 (rollback journal),
    // as SQLite itself does when no WAL exists. `PRAGMA journal_mode = DELETE` did the same with
    // a checkpoint and syncs: three quarters of a moment's first read.
    const fd = fs.openSync(tmp, 'r+');
    try {
      writeAll(fd, LEGACY_FORMAT, 2, 18);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOSPC' || code === 'SQLITE_FULL') throw new AgentDbError('STORAGE_FULL', `no room on disk to read ${id} as of that moment`);
    throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return { file, materialised: true };
}

/** Bytes the moments of `workspace` take. */
export function momentsBytes(dataDir: string, workspace: string): number {
  return folderBytes(workspaceMoments(dataDir, workspace));
}

/** Drops every moment of `workspace` (its quota needs the room); the bytes freed. */
export function dropMoments(dataDir: string, workspace: string): number {
  const dir = workspaceMoments(dataDir, workspace);
  const bytes = folderBytes(dir);
  fs.rmSync(dir, { recursive: true, force: true });
  return bytes;
}

/**
 * Drops every moment unused for `keepMs` (and temporary files as old: a build that died).
 * A reader that has one open keeps reading it: an unlinked file lives until closed.
 */
export function sweepMoments(dataDir: string, keepMs: number, now = Date.now()): number {
  const root = path.join(path.resolve(dataDir), AS_OF_ROOT);
  let dropped = 0;
  for (const ws of dirNames(root)) {
    for (const db of dirNames(path.join(root, ws))) {
      const dir = path.join(root, ws, db);
      for (const name of dirNames(dir)) {
        const file = path.join(dir, name);
        const st = fs.statSync(file, { throwIfNoEntry: false });
        if (st && now - st.mtimeMs > keepMs) {
          fs.rmSync(file, { force: true });
          dropped++;
        }
      }
    }
  }
  return dropped;
}
