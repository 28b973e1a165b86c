import fs from 'node:fs';
import path from 'node:path';
import {
  SEGMENTS_DIR,
  SEGMENT_DATA_EXT,
  SEGMENT_INDEX_EXT,
  nameSeq,
  readJson,
  SNAPSHOT_META,
  type HistorySource,
  type SegmentHeader,
  type SnapshotMeta,
} from './history-files.ts';
import { closeSegment, type Segment } from './capture-segment.ts';
import { indexIs, stampOf, stampedIndexBytes } from './capture-stamp.ts';
import { newestGeneration, newestSegment, readNames } from './newest-history.ts';
import { readIndex } from './segment-index.ts';
import { WAL_HEADER_BYTES, frameOffset, parseWalHeader } from './wal-format.ts';

/**
 * Where capture stands for one database: the newest generation and segment, and how far the
 * segment (so the live WAL it copies) has been copied. Rebuilt from the files whenever they
 * changed under it — another executor child may have captured this database since — so the
 * files, not this cache, are the truth.
 */
export interface State {
  genDir: string;
  genName: string;
  dbPages: number;
  /** Set once the generation has a segment. */
  seg?: Segment;
  stamp: string;
  /** When the stamp was last found to hold (or the state built): see {@link historyBytes}. */
  checkedAt: number;
  /**
   * Bytes of the database's whole history folder: walked once when the state is (re)built,
   * then kept by adding what each capture appends, so the quota check costs nothing per write.
   */
  bytes?: number;
  /** When `bytes` was last held against the generations' folder, and its mtime then. */
  bytesAt?: number;
  gensMtimeMs?: number;
  /**
   * Built without the write lock (a quota check, a restore's look): frames past the segment's
   * last indexed commit were left, since they may be another child's capture between its copy
   * and its index line. The next capture, under the lock, cuts them (a crash's leftovers).
   */
  uncut?: boolean;
  /**
   * Built without the write lock from an index whose last line is cut short: the bytes its whole
   * lines take. The next capture loads the files again under the lock, which cuts the rest before
   * it appends: appended after the torn line, its lines would be hidden behind it.
   */
  indexGood?: number;
  /**
   * The segment's index has a whole line that does not read back (a byte rotted, or another
   * program wrote it): what `readIndex` said. Nothing is cut then, and capture begins a new
   * generation instead of appending to a history that restores would misread.
   */
  damaged?: string;
}

/** Drops what this process knew of a database's capture, closing its open segment. */
export function dropState(dbPath: string): void {
  closeSegment(states.get(dbPath)?.seg);
  states.delete(dbPath);
}

/** What this process knows of each database's capture, by its path. */
export const states = new Map<string, State>();

/**
 * States kept at most before those of databases with no segment open (no handle capturing into
 * it) are let go, least recently used first: about a kilobyte each, kept for every database a
 * child ever opened, they made a child's memory grow with the databases it served, not its
 * handles (issue 31: 100,000 databases, 110 MB a child). The files are the truth; a state let go
 * is read from them again when next needed.
 */
const MAX_STATES = 4096;

function keepState(dbPath: string, st: State): void {
  if (states.size >= MAX_STATES && !states.has(dbPath)) {
    for (const [key, kept] of states) {
      if (states.size < (MAX_STATES * 3) / 4) break;
      if (!kept.seg?.fds) states.delete(key);
    }
  }
  usedNow(dbPath, st);
}

/**
 * Moves `st` to the end of {@link states}, which a Map keeps in the order its keys were first
 * set: let go in that order, one tenant cycling through databases pushed out another's states in
 * use (review R3), each then read from its files again.
 */
function usedNow(dbPath: string, st: State): State {
  states.delete(dbPath);
  states.set(dbPath, st);
  return st;
}

/** What this process knows of `dbPath`'s capture, if anything, counted as used now (see {@link keepState}). */
export function stateOf(dbPath: string): State | undefined {
  const st = states.get(dbPath);
  return st && usedNow(dbPath, st);
}

/**
 * `quick`: a capture about to read the WAL's salts may trust one fstat (below); anything else
 * looks in full. `locked`: the caller holds the database's write lock, so no capture is half done.
 */
export function loadState(dbPath: string, source: HistorySource, quick: boolean, locked = false): State | undefined {
  const cached = states.get(dbPath);
  // While this child's handle stayed open (the segment's files are open only then), only another
  // child's capture into this very segment, from the same WAL, can change what the state says
  // without the WAL starting over: the index's size tells, by one fstat. A new segment, a new
  // generation (another child's snapshot) or anything else first restarts the WAL, which
  // `copyNew` sees by its salts and checks in full there; a prune only moves the byte count,
  // which `historyBytes` looks after.
  if (quick && cached?.seg?.fds && indexIs(cached.seg.fds.index, stampedIndexBytes(cached.stamp))) {
    cached.checkedAt = Date.now();
    return usedNow(dbPath, cached);
  }
  if (cached && cached.stamp === stampOf(cached.genDir, cached.seg?.seq ?? 0, cached.seg?.indexPath)) {
    cached.checkedAt = Date.now();
    return usedNow(dbPath, cached);
  }
  closeSegment(cached?.seg);
  const genName = newestGeneration(source.generationsDir);
  if (!genName) return undefined;
  const genDir = path.join(source.generationsDir, genName);
  const snap = readJson<SnapshotMeta>(path.join(genDir, SNAPSHOT_META));
  if (!snap) return undefined;
  const st: State = { genDir, genName, dbPages: snap.pages, stamp: '', checkedAt: Date.now() };
  const segName = newestSegment(genDir);
  if (segName) {
    const dataPath = path.join(genDir, SEGMENTS_DIR, segName + SEGMENT_DATA_EXT);
    const indexPath = path.join(genDir, SEGMENTS_DIR, segName + SEGMENT_INDEX_EXT);
    const head = Buffer.alloc(WAL_HEADER_BYTES);
    const fd = fs.openSync(dataPath, locked ? 'r+' : 'r');
    let header: SegmentHeader | undefined;
    try {
      fs.readSync(fd, head, 0, WAL_HEADER_BYTES, 0);
      header = parseWalHeader(head);
      const index = readIndex(indexPath);
      if (index.damaged) st.damaged = `${indexPath}: ${index.damaged}`;
      // A line a crash or a full disk cut short ends what the index says: cut it off (under the
      // lock, as the frames below), or every line appended after it would stay hidden behind it.
      // Without it, the next capture looks again under the lock (`indexGood`). Never a damaged
      // index: what follows the damage is history too.
      if (index.damaged) {
        // Left as it is.
      } else if (index.tail === 'line') {
        // A whole last line without its newline: the next line appended would run into it.
        if (locked) fs.appendFileSync(indexPath, '\n');
        else st.indexGood = index.goodBytes;
      } else if (index.goodBytes < index.bytes) {
        if (locked) fs.truncateSync(indexPath, index.goodBytes);
        else st.indexGood = index.goodBytes;
      }
      const last = index.commits.at(-1);
      if (header) {
        // Frames a crash wrote past the last indexed commit were never acknowledged: cut them,
        // so the segment holds exactly what its index says. Only under the write lock: without
        // it they may be another child's capture between its copy and its index line.
        if (locked && !index.damaged) fs.ftruncateSync(fd, frameOffset(header.pageSize, (last?.frames ?? 0) + 1));
        else if (!index.damaged) st.uncut = true;
        st.seg = {
          name: segName,
          seq: nameSeq(segName)!,
          header,
          dataPath,
          indexPath,
          frames: last?.frames ?? 0,
          c1: last?.c1 ?? header.c1,
          c2: last?.c2 ?? header.c2,
        };
        if (last) st.dbPages = last.dbPages;
        // A previous segment's last commit sets the size when this one has none yet.
        else st.dbPages = previousDbPages(genDir, segName) ?? st.dbPages;
      }
    } finally {
      fs.closeSync(fd);
    }
  }
  st.stamp = stampOf(genDir, st.seg?.seq ?? 0, st.seg?.indexPath);
  keepState(dbPath, st);
  return st;
}

function previousDbPages(genDir: string, segName: string): number | undefined {
  const names = readNames(path.join(genDir, SEGMENTS_DIR))
    .filter((n) => n.endsWith(SEGMENT_INDEX_EXT))
    .map((n) => n.slice(0, -SEGMENT_INDEX_EXT.length))
    .filter((n) => n < segName);
  for (const n of names.reverse()) {
    // A damaged index is a restore's problem (it says so); capture goes on by its whole lines.
    const last = readIndex(path.join(genDir, SEGMENTS_DIR, n + SEGMENT_INDEX_EXT)).commits.at(-1);
    if (last) return last.dbPages;
  }
  return undefined;
}

/** Where a state's history ends, as a string to compare: a capture by any connection moves it. */
export function positionKey(st: State): string {
  return `${st.genName}|${st.seg?.name ?? ''}|${st.seg?.frames ?? 0}`;
}
