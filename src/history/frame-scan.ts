import fs from 'node:fs';
import { AgentDbError } from '../errors.ts';
import type { SegmentHeader } from './history-files.ts';
import { scanBuffer } from './scan-buffer.ts';
import { FRAME_HEADER_BYTES, WAL_HEADER_BYTES, checkFrames, frameBytes, frameOffset, parseWalHeader } from './wal-format.ts';

const BATCH_BYTES = 4 * 1024 * 1024;

/** One batch of a segment's frames, checked: frame `first` (1-based) is at `buf[0 …]`, `count` of them, `frameBytes` apart. */
export interface FrameBatch {
  first: number;
  count: number;
  buf: Buffer;
  frameBytes: number;
}

/**
 * Frames 1…`frames` of a segment, in batches read into the scan buffer (so a segment never sits
 * whole in memory), each frame checked against the segment's salts and cumulative checksums
 * before its batch is handed out. A batch is valid only until the next is asked for.
 * @throws AgentDbError HISTORY_CORRUPT naming the segment and the frame that failed.
 */
export function* frameBatches(generation: string, name: string, file: string, frames: number, pageSize: number): Generator<FrameBatch> {
  const where = `segment ${generation}/${name}`;
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(WAL_HEADER_BYTES);
    fs.readSync(fd, head, 0, WAL_HEADER_BYTES, 0);
    const hdr: SegmentHeader | undefined = parseWalHeader(head);
    if (!hdr || hdr.pageSize !== pageSize) throw new AgentDbError('HISTORY_CORRUPT', `${where} has no valid WAL header`);
    const fb = frameBytes(pageSize);
    const perBatch = Math.max(1, Math.floor(BATCH_BYTES / fb));
    const chain = new Uint32Array([hdr.c1, hdr.c2]);
    for (let n = 1; n <= frames; n += perBatch) {
      const count = Math.min(perBatch, frames - n + 1);
      const buf = scanBuffer(count * fb);
      const got = fs.readSync(fd, buf, 0, count * fb, frameOffset(pageSize, n));
      if (got < count * fb) throw new AgentDbError('HISTORY_CORRUPT', `${where} is shorter than its index says`);
      const valid = checkFrames(hdr, buf, count, chain);
      if (valid < count) throw new AgentDbError('HISTORY_CORRUPT', `${where} fails its checksum at frame ${n + valid}`);
      yield { first: n, count, buf, frameBytes: fb };
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** Where one page's image is: a byte offset in a segment or snapshot file. */
export interface PageRef {
  file: string;
  offset: number;
}

/**
 * The latest image of each page seen so far, by page number: a restore's plan notes every frame
 * of up to hundreds of megabytes of history (a Map with an object per frame was a third of it).
 */
export class PageIndex {
  private files: string[] = [];
  /** Per page: 1 + the index of its file in `files`, 0 for none; and its image's offset. */
  private fileOf = new Int32Array(1024);
  private offsetOf = new Float64Array(1024);
  /** Pages past what the arrays are grown to hold (see {@link DENSE_PAGES}). */
  private far = new Map<number, PageRef>();
  /** Pages noted. */
  size = 0;

  /** A file's number for {@link set}. */
  file(path: string): number {
    return this.files.push(path);
  }

  set(page: number, file: number, offset: number): void {
    if (page >= DENSE_PAGES) {
      if (!this.far.has(page)) this.size++;
      this.far.set(page, { file: this.files[file - 1]!, offset });
      return;
    }
    if (page >= this.fileOf.length) this.grow(page);
    if (this.fileOf[page] === 0) this.size++;
    this.fileOf[page] = file;
    this.offsetOf[page] = offset;
  }

  get(page: number): PageRef | undefined {
    if (page >= DENSE_PAGES) return this.far.get(page);
    const f = page < this.fileOf.length ? this.fileOf[page]! : 0;
    return f === 0 ? undefined : { file: this.files[f - 1]!, offset: this.offsetOf[page]! };
  }

  /** The pages noted up to `last`, in order, with where their images are. */
  entries(last: number): Map<number, PageRef> {
    const out = new Map<number, PageRef>();
    for (let p = 1, end = Math.min(last, this.fileOf.length - 1); p <= end; p++) {
      const f = this.fileOf[p]!;
      if (f !== 0) out.set(p, { file: this.files[f - 1]!, offset: this.offsetOf[p]! });
    }
    for (const p of [...this.far.keys()].sort((a, b) => a - b)) if (p <= last) out.set(p, this.far.get(p)!);
    return out;
  }

  private grow(page: number): void {
    let n = this.fileOf.length;
    while (n <= page) n *= 2;
    const fileOf = new Int32Array(n);
    fileOf.set(this.fileOf);
    const offsetOf = new Float64Array(n);
    offsetOf.set(this.offsetOf);
    this.fileOf = fileOf;
    this.offsetOf = offsetOf;
  }
}

/**
 * Pages below this are noted in arrays grown to the largest page seen (12 bytes a page: 200 MB
 * for the 2^24 pages of a 64 GB database of 4 KB pages); any above, in a map. A page number is
 * whatever a frame says, checksums checked but not keyed: one in the billions must not allocate
 * gigabytes.
 */
const DENSE_PAGES = 1 << 24;

/** Byte offset, in its segment file, of the page of the frame at `i` in `batch`. */
export function pageOffset(batch: FrameBatch, i: number, pageSize: number): number {
  return frameOffset(pageSize, batch.first + i) + FRAME_HEADER_BYTES;
}
