import fs from 'node:fs';
import path from 'node:path';
import { SEGMENTS_DIR, SEGMENT_DATA_EXT, SEGMENT_INDEX_EXT, segmentName, type SegmentHeader } from './history-files.ts';
import type { State } from './capture-state.ts';

/** The segment capture appends to, with its files kept open while the database's handle is. */
export interface Segment {
  name: string;
  seq: number;
  header: SegmentHeader;
  dataPath: string;
  indexPath: string;
  frames: number;
  c1: number;
  c2: number;
  /** Frames the last commit copied took: how many the next capture reads first. */
  lastCommitFrames?: number;
  /**
   * Open descriptors of its data and index files: each commit's copy would otherwise open and
   * close both (four system calls, a third of a capture's). Closed when the database's handle
   * closes (`captureBeforeClose`), when the segment or the state is replaced, and by `forgetCapture`.
   */
  fds?: { data: number; index: number };
}

export function segmentFds(seg: Segment): { data: number; index: number } {
  if (!seg.fds) {
    const data = fs.openSync(seg.dataPath, 'r+');
    try {
      // Appended to, and read at its end to tell whether another child appended (`loadState`).
      seg.fds = { data, index: fs.openSync(seg.indexPath, 'a+') };
    } catch (err) {
      fs.closeSync(data);
      throw err;
    }
  }
  return seg.fds;
}

export function closeSegment(seg: Segment | undefined): void {
  if (!seg?.fds) return;
  const { data, index } = seg.fds;
  seg.fds = undefined;
  fs.closeSync(data);
  fs.closeSync(index);
}

export function newSegment(st: State, head: Buffer, hdr: SegmentHeader): NonNullable<State['seg']> {
  const seq = (st.seg?.seq ?? 0) + 1;
  const dir = path.join(st.genDir, SEGMENTS_DIR);
  fs.mkdirSync(dir, { recursive: true });
  const name = segmentName(seq);
  const dataPath = path.join(dir, name + SEGMENT_DATA_EXT);
  const indexPath = path.join(dir, name + SEGMENT_INDEX_EXT);
  // The data file first, and only if new: it is what names the segment (a crash may leave an
  // index without one), and finding it already there means another capture began it.
  try {
    fs.writeFileSync(dataPath, head, { flag: 'wx' });
  } catch (err) {
    // Created here and then not written (a full disk): removed, or it would stand in the way.
    if ((err as { code?: string }).code !== 'EEXIST') fs.rmSync(dataPath, { force: true });
    throw err;
  }
  try {
    fs.writeFileSync(indexPath, '');
    // A header cut short (a full disk) would leave a segment no capture can read or begin again.
    if (fs.statSync(dataPath).size !== head.length)
      throw Object.assign(new Error(`history segment ${dataPath}: its header was not written whole (disk full?)`), { code: 'ENOSPC' });
  } catch (err) {
    fs.rmSync(indexPath, { force: true });
    fs.rmSync(dataPath, { force: true });
    throw err;
  }
  return { name, seq, header: hdr, dataPath, indexPath, frames: 0, c1: hdr.c1, c2: hdr.c2 };
}
