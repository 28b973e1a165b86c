import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

const WAIT_MS = 5 * 60 * 1000;

/** A sha256 being computed on another thread; {@link PendingHash.result} waits for it. */
export interface PendingHash {
  /** The sha256 (hex) and size of the file (fsynced first when asked); blocks until then. */
  result(): { sha256: string; bytes: number };
}

// Plain JavaScript, so the thread starts without the TypeScript loader; node built-ins only.
const SOURCE = `
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const { workerData } = require('node:worker_threads');
const { file, port, flag, sync } = workerData;
const done = new Int32Array(flag);
let out;
try {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(1024 * 1024);
  const fd = fs.openSync(file, sync ? 'r+' : 'r');
  let bytes = 0;
  try {
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, bytes);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      bytes += n;
    }
    if (sync) fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  out = { sha256: hash.digest('hex'), bytes };
} catch (err) {
  out = { error: String(err && err.message || err) };
}
port.postMessage(out);
Atomics.store(done, 0, 1);
Atomics.notify(done, 0);
`;

/**
 * Hashes (sha256) and, with `sync`, fsyncs `file` on a worker thread, so it runs on the
 * machine's other core while this thread copies the file (a snapshot) or SQLite copies it into
 * the live database (a restore in place); the file must not change meanwhile. Own code rather
 * than a library: it is node's crypto on a thread, with a synchronous wait, because the executor
 * child runs these between two statements.
 */
export function hashOnThread(file: string, sync: boolean): PendingHash {
  const flag = new SharedArrayBuffer(4);
  const { port1, port2 } = new MessageChannel();
  try {
    new Worker(SOURCE, { eval: true, workerData: { file, port: port2, flag, sync }, transferList: [port2] }).unref();
  } catch (err) {
    // No thread to be had (out of memory, a sandbox): the caller hashes the file itself.
    port1.close();
    return {
      result() {
        throw err;
      },
    };
  }
  let answer: { sha256: string; bytes: number } | undefined;
  return {
    result() {
      if (answer) return answer;
      // Bounded: a thread that never started must not hang the executor child.
      if (Atomics.wait(new Int32Array(flag), 0, 0, WAIT_MS) === 'timed-out') throw new Error(`hashing ${file} took over ${WAIT_MS} ms`);
      const msg = receiveMessageOnPort(port1 as MessagePort)?.message as { sha256: string; bytes: number; error?: string } | undefined;
      port1.close();
      if (!msg || msg.error) throw new Error(`could not hash ${file}: ${msg?.error ?? 'the thread gave no answer'}`);
      answer = { sha256: msg.sha256, bytes: msg.bytes };
      return answer;
    },
  };
}

/** The thread's hash, or undefined when it failed (the caller hashes the file itself then). */
export function hashedOrUndefined(hashing: PendingHash): { sha256: string; bytes: number } | undefined {
  try {
    return hashing.result();
  } catch {
    return undefined;
  }
}
