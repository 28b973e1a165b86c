import fs from 'node:fs';
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { syncFile } from './snapshot.ts';

const WAIT_MS = 30 * 60 * 1000;

/** A file copy (and fsync of the copy) under way on another thread; {@link PendingCopy.result} waits for it. */
export interface PendingCopy {
  /** Blocks until the copy is made and synced; throws when it could not be. */
  result(): void;
}

// Plain JavaScript, so the thread starts without the TypeScript loader; node built-ins only.
const SOURCE = `
const fs = require('node:fs');
const { workerData } = require('node:worker_threads');
const { from, to, port, flag } = workerData;
const done = new Int32Array(flag);
let out;
try {
  fs.copyFileSync(from, to);
  const fd = fs.openSync(to, 'r+');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  out = { ok: true };
} catch (err) {
  out = { error: String(err && err.message || err) };
}
port.postMessage(out);
Atomics.store(done, 0, 1);
Atomics.notify(done, 0);
`;

/**
 * Copies `from` to `to` (the kernel's copy_file_range, as `fs.copyFileSync`) and syncs the copy
 * on a worker thread, so this thread can meanwhile run SQLite on `from` (a restore's
 * `PRAGMA integrity_check`), which a worker thread could only do after loading SQLite itself.
 * `from` must not change meanwhile. When no thread can be had, copies here, at once.
 */
export function copyOnThread(from: string, to: string): PendingCopy {
  const flag = new SharedArrayBuffer(4);
  const { port1, port2 } = new MessageChannel();
  try {
    new Worker(SOURCE, { eval: true, workerData: { from, to, port: port2, flag }, transferList: [port2] }).unref();
  } catch {
    port1.close();
    return { result: () => copyHere(from, to) };
  }
  let finished = false;
  return {
    result() {
      if (finished) return;
      if (Atomics.wait(new Int32Array(flag), 0, 0, WAIT_MS) === 'timed-out') throw new Error(`copying ${from} took over ${WAIT_MS} ms`);
      const msg = receiveMessageOnPort(port1 as MessagePort)?.message as { ok?: true; error?: string } | undefined;
      port1.close();
      if (!msg?.ok) throw new Error(`could not copy ${from} to ${to}: ${msg?.error ?? 'the thread gave no answer'}`);
      finished = true;
    },
  };
}

function copyHere(from: string, to: string): void {
  fs.copyFileSync(from, to);
  syncFile(to);
}
