/**
 * A snapshot's chunk checksums (`snapshot.crc` beside `snapshot.sqlite`): a CRC-32 of each
 * 64 KiB, written when the snapshot is made. A restore that reads a few pages of a snapshot
 * checks just their chunks, and one that copies the whole file checks every chunk of the copy:
 * a snapshot trusted on its size and modification time alone (hashing 100 MB costs three times
 * copying it) was restored from silently after a byte rotted in place, since neither moves then.
 * CRC-32 finds such damage, not tampering: the sha256 in snapshot.json is for that, and for
 * files that come from elsewhere (a disaster restore's downloads carry no chunk checksums).
 * zlib's crc32 (node ≥ 20.15) runs at several GB/s here.
 */
import fs from 'node:fs';
import zlib from 'node:zlib';
import { AgentDbError } from '../errors.ts';
import { writeAll } from './write-all.ts';

export const SNAPSHOT_CRC = 'snapshot.crc';
/** Bytes a checksum covers; a multiple of every SQLite page size, so a page lies in one chunk. */
export const CRC_CHUNK = 64 * 1024;
const READ_BYTES = 16 * CRC_CHUNK;

/** Writes the chunk checksums of `file` to `out`, synced. */
export function writeSnapshotCrc(file: string, out: string): void {
  writeSums(out, chunkSums(file));
}

/** The CRC-32 of each {@link CRC_CHUNK} bytes of `file`. */
function chunkSums(file: string): number[] {
  const fd = fs.openSync(file, 'r');
  const sums: number[] = [];
  try {
    const buf = Buffer.allocUnsafe(READ_BYTES);
    for (let pos = 0; ; ) {
      const n = fs.readSync(fd, buf, 0, READ_BYTES, pos);
      if (n === 0) break;
      for (let at = 0; at < n; at += CRC_CHUNK) sums.push(zlib.crc32(buf.subarray(at, Math.min(n, at + CRC_CHUNK))));
      pos += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return sums;
}

/** Writes chunk checksums (computed elsewhere: on a thread, see `chunkSumsOnThread`) to `out`, synced. */
export function writeSums(out: string, sums: number[]): void {
  const body = Buffer.alloc(sums.length * 4);
  sums.forEach((c, i) => {
    body.writeUInt32BE(c, i * 4);
  });
  const w = fs.openSync(out, 'w');
  try {
    writeAll(w, body);
    fs.fsyncSync(w);
  } finally {
    fs.closeSync(w);
  }
}

/** The chunk checksums written for a snapshot, or undefined when it has none (or they do not fit its size). */
export function readSnapshotCrc(crcFile: string, bytes: number): Buffer | undefined {
  let body: Buffer;
  try {
    body = fs.readFileSync(crcFile);
  } catch {
    return undefined;
  }
  return body.length === Math.ceil(bytes / CRC_CHUNK) * 4 ? body : undefined;
}

/**
 * Checks chunks of `file` (a snapshot, or a copy of one) against `sums`: those holding the byte
 * offsets given, or every chunk.
 * @throws AgentDbError HISTORY_CORRUPT naming `what` and the first chunk that differs.
 */
export function checkChunks(file: string, sums: Buffer, offsets: Iterable<number> | 'all', what: string): void {
  const chunks =
    offsets === 'all'
      ? Array.from({ length: sums.length / 4 }, (_, i) => i)
      : [...new Set([...offsets].map((o) => Math.floor(o / CRC_CHUNK)))].sort((a, b) => a - b);
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(READ_BYTES);
    for (let i = 0; i < chunks.length; ) {
      // Runs of neighbouring chunks are read together.
      let run = 1;
      while (i + run < chunks.length && run < READ_BYTES / CRC_CHUNK && chunks[i + run] === chunks[i]! + run) run++;
      const n = fs.readSync(fd, buf, 0, run * CRC_CHUNK, chunks[i]! * CRC_CHUNK);
      for (let k = 0; k < run; k++) {
        const c = chunks[i + k]!;
        const part = buf.subarray(k * CRC_CHUNK, Math.min(n, (k + 1) * CRC_CHUNK));
        if (c * 4 + 4 > sums.length || zlib.crc32(part) !== sums.readUInt32BE(c * 4)) {
          throw new AgentDbError(
            'HISTORY_CORRUPT',
            `${what} is damaged: its bytes ${c * CRC_CHUNK}–${(c + 1) * CRC_CHUNK - 1} no longer match the checksum written with it`,
          );
        }
      }
      i += run;
    }
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Holds chunk checksums computed from a snapshot (`got`, one per chunk) to those written with it.
 * @throws AgentDbError HISTORY_CORRUPT naming `what` and the first chunk that differs.
 */
export function sameSums(got: number[], sums: Buffer, what: string): void {
  const n = sums.length / 4;
  for (let c = 0; c < Math.max(n, got.length); c++) {
    if (c >= n || c >= got.length || got[c] !== sums.readUInt32BE(c * 4)) {
      throw new AgentDbError(
        'HISTORY_CORRUPT',
        `${what} is damaged: its bytes ${c * CRC_CHUNK}–${(c + 1) * CRC_CHUNK - 1} no longer match the checksum written with it`,
      );
    }
  }
}

/**
 * Copies the first `bytes` of snapshot `from` to `to`, checking each chunk it reads against
 * `sums` (the whole of the last chunk, though only its start is copied).
 * @throws AgentDbError HISTORY_CORRUPT naming `what` and the first chunk that differs.
 */
export function copyPrefixChecked(from: string, to: string, bytes: number, sums: Buffer, what: string): void {
  const src = fs.openSync(from, 'r');
  try {
    const out = fs.openSync(to, 'w');
    try {
      const buf = Buffer.allocUnsafe(READ_BYTES);
      for (let pos = 0; pos < bytes; ) {
        const n = fs.readSync(src, buf, 0, READ_BYTES, pos);
        if (n === 0) break;
        for (let at = 0; at < n; at += CRC_CHUNK) {
          const c = (pos + at) / CRC_CHUNK;
          if (pos + at >= bytes) break;
          const part = buf.subarray(at, Math.min(n, at + CRC_CHUNK));
          if (c * 4 + 4 > sums.length || zlib.crc32(part) !== sums.readUInt32BE(c * 4)) {
            throw new AgentDbError(
              'HISTORY_CORRUPT',
              `${what} is damaged: its bytes ${c * CRC_CHUNK}–${(c + 1) * CRC_CHUNK - 1} no longer match the checksum written with it`,
            );
          }
        }
        writeAll(out, buf, Math.min(n, bytes - pos), pos);
        pos += n;
      }
    } finally {
      fs.closeSync(out);
    }
  } finally {
    fs.closeSync(src);
  }
}
