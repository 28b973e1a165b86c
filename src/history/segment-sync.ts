import fs from 'node:fs';
import path from 'node:path';
import { type Segment, segmentFds } from './capture-segment.ts';
import { syncDir } from './file-sync.ts';
import { SEGMENTS_DIR, SEGMENT_DATA_EXT, SEGMENT_INDEX_EXT } from './history-files.ts';
import { newestGeneration, newestSegment } from './newest-history.ts';

// Capture writes segments without fsync: until a checkpoint the live WAL holds the same frames,
// and a power cut loses both alike (`synchronous = NORMAL`). SQLite's checkpoint fsyncs the WAL
// and the database file, then the next commit starts the WAL over: from then on the frames exist
// only in the segment. A power cut with the segment still in the page cache left the live file
// with commits history had lost, and the next WAL's frames, appended behind the hole as the
// generation going on, would restore pages of two states mixed, answering ok. So a segment is
// flushed before whatever folds its WAL into the file: capture's checkpoint, a handle's last
// close, a new generation's snapshot. Once per checkpoint (every `checkpointBytes` of WAL), not
// per commit. fdatasync flushes the file whichever process wrote it (another child's copy too).

/** Flushes `seg`'s data and index, and the names of both, when it holds frames the WAL is about to lose. */
export function syncSegment(seg: Segment | undefined): void {
  if (!seg || seg.frames === 0) return;
  const { data, index } = segmentFds(seg);
  fs.fdatasyncSync(data);
  fs.fdatasyncSync(index);
  syncNames(path.dirname(seg.dataPath));
}

/**
 * {@link syncSegment} for the newest segment history's files show, for a caller that holds no
 * capture state of its own (a new generation begins: a restore, a gap, a snapshot asked for).
 */
export function syncNewestSegment(generationsDir: string): void {
  const gen = newestGeneration(generationsDir);
  const name = gen && newestSegment(path.join(generationsDir, gen));
  if (!gen || !name) return;
  const dir = path.join(generationsDir, gen, SEGMENTS_DIR);
  for (const ext of [SEGMENT_DATA_EXT, SEGMENT_INDEX_EXT]) {
    let fd: number;
    try {
      fd = fs.openSync(path.join(dir, name + ext), 'r');
    } catch (err) {
      // A crash can leave a segment's data without its index: nothing of it to flush.
      if ((err as { code?: string }).code === 'ENOENT') continue;
      throw err;
    }
    try {
      fs.fdatasyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }
  syncNames(dir);
}

/** The segments folder and its generation's: a segment created since may be named in neither yet. */
function syncNames(segmentsDir: string): void {
  syncDir(segmentsDir);
  syncDir(path.dirname(segmentsDir));
}
