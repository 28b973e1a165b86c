/**
 * SQLite's WAL file format (https://www.sqlite.org/fileformat2.html#walformat), as capture and
 * restore need it: the 32-byte header, 24-byte frame headers, and the cumulative checksum that
 * chains every frame to the header and to the frames before it. Own code because no library
 * reads WAL frames; it is small and pinned by tests against files SQLite wrote.
 */
import fs from 'node:fs';
import type { SegmentHeader } from './history-files.ts';
import { wasmSums } from './wal-sum-wasm.ts';

export const WAL_HEADER_BYTES = 32;
export const FRAME_HEADER_BYTES = 24;
const MAGIC_LE = 0x377f0682;
const MAGIC_BE = 0x377f0683;

/** The header of a WAL (or segment) file, or undefined when `buf` does not start with one. */
export function parseWalHeader(buf: Buffer): SegmentHeader | undefined {
  if (buf.length < WAL_HEADER_BYTES) return undefined;
  const magic = buf.readUInt32BE(0);
  if (magic !== MAGIC_LE && magic !== MAGIC_BE) return undefined;
  const bigEndian = magic === MAGIC_BE;
  const [c1, c2] = walChecksum(bigEndian, buf, 0, 24, 0, 0);
  // A header whose checksum fails is a WAL SQLite would ignore (and overwrite).
  if (c1 !== buf.readUInt32BE(24) || c2 !== buf.readUInt32BE(28)) return undefined;
  return {
    bigEndian,
    pageSize: buf.readUInt32BE(8),
    checkpointSeq: buf.readUInt32BE(12),
    salt1: buf.readUInt32BE(16),
    salt2: buf.readUInt32BE(20),
    c1,
    c2,
  };
}

/**
 * SQLite's WAL checksum over `buf[start, end)` (a multiple of 8 bytes), continuing from
 * `(s1, s2)`: 32-bit words in the byte order the magic names, summed in pairs.
 */
export function walChecksum(bigEndian: boolean, buf: Buffer, start: number, end: number, s1: number, s2: number): [number, number] {
  // Words in the host's order (SQLite writes its own, so nearly always) are read through a
  // typed-array view: this sum runs over every byte captured, and readUInt32 per word is ~5× slower.
  if (bigEndian === HOST_BIG_ENDIAN && (buf.byteOffset + start) % 4 === 0) {
    // Summed as int32 (the same bits mod 2^32), which V8 keeps in machine words: 2.5-3× faster
    // than uint32 sums taken back with `>>> 0`, which it computes as doubles.
    const words = new Int32Array(buf.buffer, buf.byteOffset + start, (end - start) >>> 2);
    let a = s1 | 0;
    let b = s2 | 0;
    for (let i = 0; i < words.length; i += 2) {
      a = (a + words[i]! + b) | 0;
      b = (b + words[i + 1]! + a) | 0;
    }
    return [a >>> 0, b >>> 0];
  }
  for (let i = start; i < end; i += 8) {
    const a = bigEndian ? buf.readUInt32BE(i) : buf.readUInt32LE(i);
    const b = bigEndian ? buf.readUInt32BE(i + 4) : buf.readUInt32LE(i + 4);
    s1 = (s1 + a + s2) >>> 0;
    s2 = (s2 + b + s1) >>> 0;
  }
  return [s1, s2];
}

const HOST_BIG_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 0;

/** A word view of a whole buffer's memory, made once per buffer: a view per frame cost more than its sum. */
const wordViews = new WeakMap<ArrayBuffer, Int32Array>();
function wordsOf(memory: ArrayBuffer): Int32Array {
  let words = wordViews.get(memory);
  if (!words) {
    words = new Int32Array(memory, 0, memory.byteLength >>> 2);
    wordViews.set(memory, words);
  }
  return words;
}

/** One frame's header. */
export interface FrameHeader {
  pgno: number;
  /** The database size in pages after the commit, for a commit frame; 0 otherwise. */
  commit: number;
  salt1: number;
  salt2: number;
  c1: number;
  c2: number;
}

export function parseFrameHeader(buf: Buffer, at: number): FrameHeader {
  return {
    pgno: buf.readUInt32BE(at),
    commit: buf.readUInt32BE(at + 4),
    salt1: buf.readUInt32BE(at + 8),
    salt2: buf.readUInt32BE(at + 12),
    c1: buf.readUInt32BE(at + 16),
    c2: buf.readUInt32BE(at + 20),
  };
}

/**
 * Checks the frame at `buf[at …]` against the chain `(s1, s2)`: salts equal to the header's and
 * the checksum over its first 8 header bytes and its page. Returns the chain after it, or
 * undefined when the frame does not belong (the end of the valid WAL, or damage).
 */
export function checkFrame(hdr: SegmentHeader, buf: Buffer, at: number, s1: number, s2: number): { frame: FrameHeader; c: [number, number] } | undefined {
  if (buf.readUInt32BE(at + 8) !== hdr.salt1 || buf.readUInt32BE(at + 12) !== hdr.salt2) return undefined;
  const c = frameSum(hdr, buf, at, s1, s2);
  if (c[0] !== buf.readUInt32BE(at + 16) || c[1] !== buf.readUInt32BE(at + 20)) return undefined;
  return { frame: parseFrameHeader(buf, at), c };
}

/**
 * Checks `count` consecutive frames at the start of `buf` as {@link checkFrame} does, from the
 * chain in `chain` ([s1, s2], updated in place to the chain after the last that belongs), and
 * returns how many belong before the first that does not. Allocates nothing per frame: a
 * restore's plan checks every frame of up to hundreds of megabytes.
 */
export function checkFrames(hdr: SegmentHeader, buf: Buffer, count: number, chain: Uint32Array): number {
  const fb = frameBytes(hdr.pageSize);
  const wasm = hdr.bigEndian ? undefined : wasmSums(buf);
  let a = chain[0]!;
  let b = chain[1]!;
  let n = 0;
  for (; n < count; n++) {
    const at = n * fb;
    if (buf.readUInt32BE(at + 8) !== hdr.salt1 || buf.readUInt32BE(at + 12) !== hdr.salt2) break;
    let c1: number;
    let c2: number;
    if (wasm) {
      wasm.sum(buf.byteOffset + at, hdr.pageSize, a, b);
      c1 = wasm.result[0]!;
      c2 = wasm.result[1]!;
    } else {
      [c1, c2] = frameSum(hdr, buf, at, a, b);
    }
    if (c1 !== buf.readUInt32BE(at + 16) || c2 !== buf.readUInt32BE(at + 20)) break;
    a = c1;
    b = c2;
  }
  chain[0] = a;
  chain[1] = b;
  return n;
}

/** The checksum of the frame at `buf[at …]` (its first 8 header bytes, then its page), continuing from (s1, s2). */
function frameSum(hdr: SegmentHeader, buf: Buffer, at: number, s1: number, s2: number): [number, number] {
  // Frames a scan read into the WebAssembly module's memory are summed there (see `wal-sum-wasm.ts`).
  const wasm = hdr.bigEndian ? undefined : wasmSums(buf);
  if (wasm) {
    wasm.sum(buf.byteOffset + at, hdr.pageSize, s1, s2);
    return [wasm.result[0]!, wasm.result[1]!];
  }
  if (hdr.bigEndian === HOST_BIG_ENDIAN && (buf.byteOffset + at) % 4 === 0) return frameWordsSum(buf, at, hdr.pageSize, s1, s2);
  const c = walChecksum(hdr.bigEndian, buf, at, at + 8, s1, s2);
  return walChecksum(hdr.bigEndian, buf, at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + hdr.pageSize, c[0], c[1]);
}

/**
 * One pass over a frame's words in the host's order, its first 8 header bytes then its page (the
 * checksum fields and salts between are skipped): two passes with their views and pairs cost a
 * quarter of planning a restore over 100 MB.
 */
function frameWordsSum(buf: Buffer, at: number, pageSize: number, s1: number, s2: number): [number, number] {
  const words = wordsOf(buf.buffer as ArrayBuffer);
  const w = (buf.byteOffset + at) >>> 2;
  let a = (s1 + words[w]! + s2) | 0;
  let b = (s2 + words[w + 1]! + a) | 0;
  for (let i = w + (FRAME_HEADER_BYTES >>> 2), end = w + ((FRAME_HEADER_BYTES + pageSize) >>> 2); i < end; i += 2) {
    a = (a + words[i]! + b) | 0;
    b = (b + words[i + 1]! + a) | 0;
  }
  return [a >>> 0, b >>> 0];
}

/** Bytes one frame takes with pages of `pageSize`. */
export function frameBytes(pageSize: number): number {
  return FRAME_HEADER_BYTES + pageSize;
}

/** Byte offset of frame `n` (1-based) in a WAL or segment file. */
export function frameOffset(pageSize: number, n: number): number {
  return WAL_HEADER_BYTES + (n - 1) * frameBytes(pageSize);
}

/** What {@link committedWalFrames} found: each page's last committed frame, and the database's size after the last commit. */
export interface CommittedWalFrames {
  pageSize: number;
  /** The database's size in pages after the last commit (0: no commit). */
  pages: number;
  /** Each page written by a committed frame, and the byte offset of its last such frame. */
  latest: Map<number, number>;
}

/**
 * The committed frames of the WAL file `file`: frames after the last commit frame, or past the
 * first that fails its checksum, are no part of the database. `limit` caps the frames read, given
 * the WAL's header (a WAL index's committed end). Undefined when there is no WAL or no header.
 */
export function committedWalFrames(file: string, limit?: (hdr: SegmentHeader) => number): CommittedWalFrames | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const head = Buffer.alloc(WAL_HEADER_BYTES);
    if (fs.readSync(fd, head, 0, WAL_HEADER_BYTES, 0) < WAL_HEADER_BYTES) return undefined;
    const hdr = parseWalHeader(head);
    if (!hdr) return undefined;
    const most = limit?.(hdr) ?? Number.POSITIVE_INFINITY;
    const buf = Buffer.alloc(frameBytes(hdr.pageSize));
    const pgnos: number[] = [];
    let committed = 0;
    let pages = 0;
    let [c1, c2] = [hdr.c1, hdr.c2];
    for (let n = 1; n <= most && fs.readSync(fd, buf, 0, buf.length, frameOffset(hdr.pageSize, n)) === buf.length; n++) {
      const ok = checkFrame(hdr, buf, 0, c1, c2);
      if (!ok) break;
      [c1, c2] = ok.c;
      pgnos.push(ok.frame.pgno);
      if (ok.frame.commit > 0) {
        committed = n;
        pages = ok.frame.commit;
      }
    }
    const latest = new Map<number, number>();
    for (let n = 1; n <= committed; n++) latest.set(pgnos[n - 1]!, frameOffset(hdr.pageSize, n));
    return { pageSize: hdr.pageSize, pages, latest };
  } finally {
    fs.closeSync(fd);
  }
}

/** The pages written by the committed frames of the WAL file `file` (see {@link committedWalFrames}); empty when there is no WAL. */
export function walPages(file: string): Set<number> {
  return new Set(committedWalFrames(file)?.latest.keys());
}
