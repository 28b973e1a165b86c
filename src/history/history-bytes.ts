import fs from 'node:fs';
import path from 'node:path';
import { loadState, stateOf } from './capture-state.ts';
import type { HistorySource } from './history-files.ts';

/**
 * The bytes database `dbPath`'s history takes on disk (`historyRoot` is its history folder):
 * the running total capture keeps, walked afresh only when the files changed under it (a new
 * generation, a restore, a prune, another child's capture). Zero with no history.
 */
export function historyBytes(dbPath: string, source: HistorySource, historyRoot: string): number {
  // A quota check before each write: the state the last capture (after the previous write)
  // checked is recent enough, and looking at the files again (four system calls) cost as much as
  // the rest of the check. A prune or another child's capture shows at the next capture's look.
  const cached = stateOf(dbPath);
  // Past that, the files in full: the one-fstat look (`loadState`) holds only for a capture about
  // to read the WAL's salts, and another child may have captured into a new segment meanwhile.
  const st = cached?.bytes !== undefined && Date.now() - cached.checkedAt < BYTES_FRESH_MS ? cached : loadState(dbPath, source, false);
  if (!st) return 0;
  // A prune (the generations' folder changed) is looked for at most once a second.
  const now = Date.now();
  if (st.bytes === undefined || now - (st.bytesAt ?? 0) >= BYTES_FRESH_MS) {
    const gens = fs.statSync(source.generationsDir, { throwIfNoEntry: false })?.mtimeMs;
    if (st.bytes === undefined || gens !== st.gensMtimeMs) st.bytes = folderBytes(historyRoot);
    st.gensMtimeMs = gens;
    st.bytesAt = now;
  }
  return st.bytes;
}

/** How long a capture's look at the files stands for the quota check (see {@link historyBytes}). */
const BYTES_FRESH_MS = 1000;

/**
 * Bytes under `dir`, each file counted once: a restore's generation links the snapshot it began
 * from (`linked-generation.ts`), and restoring to the same snapshot again and again must not
 * charge the quota for it each time. `seen` (device:inode) carries that across several folders.
 */
export function folderBytes(dir: string, seen = new Set<string>()): number {
  let total = 0;
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += folderBytes(p, seen);
    else if (e.isFile()) total += fileBytesOnce(p, seen);
  }
  return total;
}

/** A file's bytes, or 0 when gone or already counted through another of its links (`seen`: device:inode). */
export function fileBytesOnce(file: string, seen: Set<string>): number {
  const st = fs.statSync(file, { throwIfNoEntry: false });
  if (!st) return 0;
  const id = `${st.dev}:${st.ino}`;
  if (st.nlink > 1 && seen.has(id)) return 0;
  seen.add(id);
  return st.size;
}
