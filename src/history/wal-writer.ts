import { FRAME_HEADER_BYTES, WAL_HEADER_BYTES, frameBytes, frameOffset, parseWalHeader, walChecksum } from './wal-format.ts';
import type { SegmentHeader } from './history-files.ts';
import { writeAll } from './write-all.ts';

const BATCH_BYTES = 4 * 1024 * 1024;
const HOST_BIG_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 0;

/** What {@link writeWal} wrote: its header, frames, and the cumulative checksum after the last. */
export interface WalWritten {
  header: SegmentHeader;
  frames: number;
  c1: number;
  c2: number;
}

/**
 * Writes, from offset 0 of `fd`, a WAL holding one commit: a frame for each of `pages` (in the
 * order given) with the image `read` puts into the buffer it is handed, the last frame marking
 * the commit with the database's size `dbPages`, in SQLite's format (the host's byte order, as
 * SQLite writes) under `salts` (8 bytes). Both a restore's commit written as a database's -wal and
 * the first segment of a restore's generation are such a file; pages go in batches, so the
 * images never sit in memory all at once. Not synced: the caller decides.
 */
export function writeWal(
  fd: number,
  pageSize: number,
  pages: readonly number[],
  dbPages: number,
  salts: Buffer,
  read: (pgno: number, into: Buffer) => void,
): WalWritten {
  const head = Buffer.alloc(WAL_HEADER_BYTES);
  head.writeUInt32BE(HOST_BIG_ENDIAN ? 0x377f0683 : 0x377f0682, 0);
  head.writeUInt32BE(3007000, 4);
  head.writeUInt32BE(pageSize, 8);
  head.writeUInt32BE(0, 12);
  salts.copy(head, 16, 0, 8);
  let [c1, c2] = walChecksum(HOST_BIG_ENDIAN, head, 0, 24, 0, 0);
  head.writeUInt32BE(c1, 24);
  head.writeUInt32BE(c2, 28);
  const header = parseWalHeader(head)!;
  const fb = frameBytes(pageSize);
  const perBatch = Math.max(1, Math.floor(BATCH_BYTES / fb));
  const buf = Buffer.alloc(Math.min(perBatch, Math.max(1, pages.length)) * fb);
  writeAll(fd, head, WAL_HEADER_BYTES, 0);
  for (let i = 0; i < pages.length; i += perBatch) {
    const batch = pages.slice(i, i + perBatch);
    batch.forEach((p, k) => {
      const at = k * fb;
      buf.fill(0, at, at + FRAME_HEADER_BYTES);
      buf.writeUInt32BE(p, at);
      buf.writeUInt32BE(i + k === pages.length - 1 ? dbPages : 0, at + 4);
      buf.writeUInt32BE(header.salt1, at + 8);
      buf.writeUInt32BE(header.salt2, at + 12);
      read(p, buf.subarray(at + FRAME_HEADER_BYTES, at + fb));
      [c1, c2] = walChecksum(HOST_BIG_ENDIAN, buf, at, at + 8, c1, c2);
      [c1, c2] = walChecksum(HOST_BIG_ENDIAN, buf, at + FRAME_HEADER_BYTES, at + fb, c1, c2);
      buf.writeUInt32BE(c1, at + 16);
      buf.writeUInt32BE(c2, at + 20);
    });
    writeAll(fd, buf, batch.length * fb, frameOffset(pageSize, i + 1));
  }
  return { header, frames: pages.length, c1, c2 };
}
