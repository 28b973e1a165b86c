import { keptThread } from './kept-thread.ts';

/** A sha256 being computed on another thread; {@link PendingHash.result} waits for it. */
export interface PendingHash {
  /** The sha256 (hex) and size of the file (fsynced first when asked); blocks until then. */
  result(): { sha256: string; bytes: number };
}

// Run on one thread per process, kept between tasks (`keptThread`).
const SOURCE = `
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const zlib = require('node:zlib');
const { parentPort } = require('node:worker_threads');
parentPort.on('message', ({ file, fd: kept, port, flag, sync, crcChunk }) => {
  let out;
  try {
    // crcChunk: the CRC-32 of each chunk of that many bytes instead of the sha256.
    const hash = crcChunk ? undefined : createHash('sha256');
    const sums = [];
    const buf = Buffer.allocUnsafe(1024 * 1024);
    // kept: the process's descriptor of a live database file, read and never closed here (a
    // thread's close lets go the process's locks on the file: see kept-descriptors.ts).
    const fd = kept === undefined ? fs.openSync(file, sync ? 'r+' : 'r') : kept;
    let bytes = 0;
    try {
      for (;;) {
        const n = fs.readSync(fd, buf, 0, buf.length, bytes);
        if (n === 0) break;
        if (hash) hash.update(buf.subarray(0, n));
        else for (let at = 0; at < n; at += crcChunk) sums.push(zlib.crc32(buf.subarray(at, Math.min(n, at + crcChunk))));
        bytes += n;
      }
      if (sync) fs.fsyncSync(fd);
    } finally {
      if (kept === undefined) fs.closeSync(fd);
    }
    out = hash ? { sha256: hash.digest('hex'), bytes } : { sums, bytes };
  } catch (err) {
    out = { error: String(err && err.message || err) };
  }
  port.postMessage(out);
  port.close();
  const done = new Int32Array(flag);
  Atomics.store(done, 0, 1);
  Atomics.notify(done, 0);
});
`;

/** The process's hashing thread. */
const hashThread = keptThread(SOURCE);

/**
 * Hashes (sha256) and, with `sync`, fsyncs `file` on a worker thread, so it runs on the
 * machine's other core while this thread copies the file (a snapshot) or SQLite copies it into
 * the live database (a restore in place); the file must not change meanwhile. `fd`: read it
 * through this descriptor, which the thread leaves open (a live database's, `keptDescriptor`).
 */
export function hashOnThread(file: string, sync: boolean, fd?: number): PendingHash {
  const wait = hashThread.task({ file, sync, fd }, file);
  let answer: { sha256: string; bytes: number } | undefined;
  return {
    result() {
      if (answer) return answer;
      const msg = wait('hash') as { sha256: string; bytes: number };
      answer = { sha256: msg.sha256, bytes: msg.bytes };
      return answer;
    },
  };
}

/**
 * The CRC-32 of each `chunk` bytes of `file`, computed on a worker thread while this one copies
 * it (see `snapshot-crc.ts`); `result()` blocks until then and throws when no thread could.
 * `fd`: read it through this descriptor, left open (as {@link hashOnThread}).
 */
export function chunkSumsOnThread(file: string, chunk: number, fd?: number): { result(): number[] } {
  const wait = hashThread.task({ file, sync: false, crcChunk: chunk, fd }, file);
  return { result: () => (wait('check') as { sums: number[] }).sums };
}

/** The thread's hash, or undefined when it failed (the caller hashes the file itself then). */
export function hashedOrUndefined(hashing: PendingHash): { sha256: string; bytes: number } | undefined {
  try {
    return hashing.result();
  } catch {
    return undefined;
  }
}
