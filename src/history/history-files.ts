/**
 * Where a database's point-in-time history lives on disk, and how to read its parts.
 *
 * ```
 * AGENTDB_DATA_DIR/history/<workspace>/<agent | _workspace>/     (historyDir)
 *   generations/                                                (generationsDir: a HistorySource)
 *     g0000000001/                                              one generation: a snapshot, then segments
 *       snapshot.sqlite                                         page-exact copy of the database when it began
 *       snapshot.json                                           SnapshotMeta (sha256, size, pages, time)
 *       segments/00000001.wal                                   a WAL file: its 32-byte header, then committed frames only
 *       segments/00000001.idx                                   JSON lines, one CommitRecord per commit in it
 *       ended.json                                              GenerationEnd, once a later generation began
 *   undo/<undoId>.json                                          UndoPoint: where an in-place restore left from
 *   readers/<token>                                             a restore reading this history now (prune keeps out)
 * ```
 *
 * The history folder is named after the database id, not its shard, so it stays put when
 * SHARD_COUNT changes and a disaster restore finds it by name. A generation is a snapshot and
 * every commit after it, with no gap: one starts when a database is first captured, when its WAL
 * was reset behind capture's back (a gap), after each nightly snapshot and after a restore. A
 * segment is one WAL's committed frames, copied as they were (same header, salts and cumulative
 * checksums), so any segment can be verified on its own; a new segment starts whenever the live
 * WAL starts over (after a checkpoint). Names sort in time order as plain strings.
 *
 * This module only reads; capture (`history/handle-capture.ts`) writes. Its exports are a stable
 * API: the blob backups and disaster restore read the same files.
 */
import path from 'node:path';
import { dirNames } from './dir-names.ts';
import { readJson } from './json-file.ts';

// Re-exported for the modules that imported them from here before they had a file of their own
// (issue 26 moved them without touching those imports); new code imports json-file.ts.
export { readJson, writeJsonAtomic } from './json-file.ts';

/** The folder under AGENTDB_DATA_DIR that holds every database's history. */
export const HISTORY_ROOT = 'history';
/** The history folder name of a workspace's shared database (agent names cannot start with `_`). */
export const WORKSPACE_HISTORY = '_workspace';
export const GENERATIONS_DIR = 'generations';
export const SEGMENTS_DIR = 'segments';
export const UNDO_DIR = 'undo';
export const READERS_DIR = 'readers';
export const SNAPSHOT_FILE = 'snapshot.sqlite';
export const SNAPSHOT_META = 'snapshot.json';
export const GENERATION_END = 'ended.json';
export const SEGMENT_DATA_EXT = '.wal';
export const SEGMENT_INDEX_EXT = '.idx';

/** A generation's folder name: `g` and ten digits, from 1. */
export function generationName(seq: number): string {
  return `g${String(seq).padStart(10, '0')}`;
}

/** A segment's base name: eight digits, from 1, within its generation. */
export function segmentName(seq: number): string {
  return String(seq).padStart(8, '0');
}

/** The sequence number in a generation or segment name, or undefined when it is not one. */
export function nameSeq(name: string): number | undefined {
  const m = /^g?(\d{8,10})$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/**
 * The history folder of database `id` (`<workspace>` or `<workspace>/<agent>`). The id must be
 * one `databaseId` made (checked names): this only joins.
 */
export function historyDir(dataDir: string, id: string): string {
  const [workspace, agent] = id.split('/');
  return path.join(path.resolve(dataDir), HISTORY_ROOT, workspace!, agent ?? WORKSPACE_HISTORY);
}

/** The database ids that have a history folder under `dataDir`. */
export function historyDatabases(dataDir: string): string[] {
  const root = path.join(path.resolve(dataDir), HISTORY_ROOT);
  const ids: string[] = [];
  for (const workspace of dirNames(root)) {
    for (const name of dirNames(path.join(root, workspace))) ids.push(name === WORKSPACE_HISTORY ? workspace : `${workspace}/${name}`);
  }
  return ids.sort();
}

/**
 * A folder of generations (`g0000000001/…`) to restore from: a database's own
 * `<historyDir>/generations`, or files a disaster restore downloaded into the same shape.
 */
export interface HistorySource {
  generationsDir: string;
}

/** The local history of a database as a {@link HistorySource}. */
export function localSource(dataDir: string, id: string): HistorySource {
  return { generationsDir: path.join(historyDir(dataDir, id), GENERATIONS_DIR) };
}

/** What `snapshot.json` says about a generation's snapshot. */
export interface SnapshotMeta {
  /** `<generation>` (one snapshot per generation). */
  id: string;
  generation: string;
  /** When it was taken (epoch ms): the state of the database at that moment. */
  at: number;
  /** Hex sha256 of `snapshot.sqlite`. */
  sha256: string;
  bytes: number;
  pageSize: number;
  pages: number;
  /** Why the generation began. */
  reason: 'first' | 'gap' | 'nightly' | 'restore' | 'manual';
  /**
   * The snapshot file as it was when its sha256 was computed (while it was written): a restore
   * finding it unchanged (same size and modification time) skips hashing it again. Absent on
   * files that did not come from this disk (a disaster restore's downloads): those are hashed.
   */
  verified?: { size: number; mtimeMs: number };
  /**
   * The snapshot passed `PRAGMA quick_check` as it was made (or is a checked snapshot,
   * linked): a restore that copies it, checked against its checksums, and applies committed
   * frames skips checking the result (`Rebuilt.sound`). Absent when the check found damage, or
   * on snapshots made before it was kept.
   */
  checked?: true;
  /**
   * The previous generation's last commit when this snapshot was taken, set only when every
   * frame up to it had been copied and checkpointed first: the snapshot is exactly that state,
   * so a restore may read across the boundary (`history/delta-restore.ts`). Absent after a gap,
   * a restore's rebuilt file, or a capture that could not finish.
   */
  follows?: HistoryPosition;
  /**
   * Set when the snapshot is another generation's snapshot file, linked, and the state this
   * generation begins with is it plus the first commit of `segment` (a restore that copied a
   * file in: what it changed on top of that snapshot). That commit is the generation's start, not
   * a change an agent made: it carries the snapshot's time and is not counted as a commit.
   * `began`: the restore's start, its activity row's time (epoch ms). When history begins with
   * this generation (a restore from the blob store; a restore in place once retention pruned the
   * generations before it), the activity list reads the rows before it as the snapshot's and
   * that row as the base commit's: the snapshot carrying the restore's own time took every row,
   * and the restore was no entry of the list (session 36, N14; session 37, N15). Absent on
   * others, and on restores in place written before session 37.
   */
  base?: { segment: string; frames: number; began?: number };
  /**
   * A `gap` generation begun because commits reached the file that history never got (another
   * connection's, a program outside agentdb: seen by the WAL index's count of commits, or by the
   * file no longer matching the seal): the moments after the previous generation's last commit
   * and before this snapshot are lost, and restores to them answer HISTORY_LOST (`planRestore`).
   * Not set for gaps without such evidence (a damaged index, a WAL header history cannot follow,
   * a crashed restore's leftovers), nor on gaps made before it was kept.
   */
  lost?: true;
}

/** What `ended.json` says: the generation is closed, every segment in it too. */
export interface GenerationEnd {
  endedAt: number;
  /** The generation that followed. */
  next: string;
}

/**
 * One commit as a segment's index keeps it: one JSON line, appended after its frames. Frame
 * counts are cumulative within the segment (frame `n` lives at byte 32 + (n-1)·(24+pageSize)).
 */
export interface CommitRecord {
  /** When capture saw it committed (epoch ms). Commits a crash left in the WAL share the time they were found. */
  at: number;
  /** Frames in the segment up to and including this commit's last frame. */
  frames: number;
  /** Size of the database in pages after this commit (the commit frame's field). */
  dbPages: number;
  /** Cumulative WAL checksum after this commit's last frame, to verify and to resume. */
  c1: number;
  c2: number;
}

/** The header of a segment (the header of the WAL it was copied from). */
export interface SegmentHeader {
  bigEndian: boolean;
  pageSize: number;
  checkpointSeq: number;
  salt1: number;
  salt2: number;
  c1: number;
  c2: number;
}

/** One segment of a generation, as listed. */
export interface SegmentInfo {
  generation: string;
  name: string;
  seq: number;
  dataPath: string;
  indexPath: string;
  /** No more frames will be added: a later segment or generation exists. */
  closed: boolean;
}

/** One generation, as listed. */
export interface GenerationInfo {
  name: string;
  seq: number;
  dir: string;
  snapshotPath: string;
  /** Undefined while the snapshot is still being written (or was lost). */
  snapshot?: SnapshotMeta;
  end?: GenerationEnd;
  /** The newest generation of the database (the one capture appends to). */
  current: boolean;
}

/** A database's generations, oldest first (only complete ones: with a snapshot written). */
export function listGenerations(source: HistorySource): GenerationInfo[] {
  const names = dirNames(source.generationsDir)
    .filter((n) => n.startsWith('g') && nameSeq(n) !== undefined)
    .sort();
  return names.map((name, i) => {
    const dir = path.join(source.generationsDir, name);
    const snapshot = readJson<SnapshotMeta>(path.join(dir, SNAPSHOT_META));
    const end = readJson<GenerationEnd>(path.join(dir, GENERATION_END));
    return {
      name,
      seq: nameSeq(name)!,
      dir,
      snapshotPath: path.join(dir, SNAPSHOT_FILE),
      current: i === names.length - 1,
      ...(snapshot ? { snapshot } : {}),
      ...(end ? { end } : {}),
    };
  });
}

/** The segments of one generation, oldest first. */
export function listSegments(
  gen: Pick<GenerationInfo, 'name' | 'dir' | 'current'> & { end?: GenerationEnd; snapshot?: Pick<SnapshotMeta, 'base'> },
): SegmentInfo[] {
  const dir = path.join(gen.dir, SEGMENTS_DIR);
  const names = dirNames(dir)
    .filter((n) => n.endsWith(SEGMENT_DATA_EXT))
    .map((n) => n.slice(0, -SEGMENT_DATA_EXT.length))
    .filter((n) => nameSeq(n) !== undefined)
    .sort();
  const genClosed = !gen.current || gen.end !== undefined;
  return names.map((name, i) => ({
    generation: gen.name,
    name,
    seq: nameSeq(name)!,
    dataPath: path.join(dir, name + SEGMENT_DATA_EXT),
    indexPath: path.join(dir, name + SEGMENT_INDEX_EXT),
    // A generation's base commit is written whole before it begins; capture never appends to it.
    closed: genClosed || i < names.length - 1 || gen.snapshot?.base?.segment === name,
  }));
}

/** Every closed segment of a database (what a backup may copy once and for all). */
export function closedSegments(source: HistorySource): SegmentInfo[] {
  return listGenerations(source).flatMap((g) => listSegments(g).filter((s) => s.closed));
}

export interface UndoPoint {
  id: string;
  database: string;
  createdAt: number;
  /** The moment the restore went to (epoch ms), or the undo point it undid. */
  restoredTo: number;
  /** The state just before the restore: the last commit captured then. */
  position: HistoryPosition;
  /** A restore within the generation (one commit of the changed pages, then its audit row): the last of its own commits. */
  restoreEnd?: HistoryPosition;
  /**
   * Set while a restore within the generation runs (see `history/restore-within-generation.ts`): the request
   * (to finish it under the same undo id when it is asked again after a crash), the salts of the
   * WAL its commit was written in (to tell whether it landed), and its audit row's text.
   */
  pending?: { key: string; salts: string; audited: string; by: { who: string; via: string } };
}

/** One commit in a database's history: its generation, segment, and frame count there. */
export interface HistoryPosition {
  generation: string;
  /** Empty when the generation had no commit yet (its snapshot is the state). */
  segment: string;
  frames: number;
}

/** The undo points of a database, oldest first. */
export function listUndoPoints(dir: string): UndoPoint[] {
  const undo = path.join(dir, UNDO_DIR);
  return dirNames(undo)
    .filter((n) => n.endsWith('.json'))
    .flatMap((n) => readJson<UndoPoint>(path.join(undo, n)) ?? [])
    .sort((a, b) => a.createdAt - b.createdAt);
}

/** The file of one undo point. */
export function undoPath(dir: string, undoId: string): string {
  return path.join(dir, UNDO_DIR, `${undoId}.json`);
}
