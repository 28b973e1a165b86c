import { wasmFrameBuffer } from './wal-sum-wasm.ts';

/**
 * The buffer a scan of history files reads a batch into (a restore's plan or rebuild), kept for
 * the next: a fresh 4 MB buffer per segment cost its page faults on every read into it (a third
 * of planning a restore over 100 MB of frames). One scan at a time per thread: a caller must be
 * done with the batch before it scans again.
 */
let batch = Buffer.alloc(0);

export function scanBuffer(bytes: number): Buffer {
  // In the WebAssembly checksum's memory when there is one: its frames are summed there.
  const wasm = wasmFrameBuffer(bytes);
  if (wasm) return wasm;
  if (batch.length < bytes) batch = Buffer.allocUnsafe(bytes);
  return batch.subarray(0, bytes);
}
