import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, closeSync, writeSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FolderBlobStore } from '../src/blobs/folder-blob-store.ts';
import { quantile, round } from './stats.ts';

/** Blob upload to the folder store against `cp` of the same file, medians of interleaved rounds. */
export interface BlobUploadStats {
  fileMb: number;
  rounds: number;
  /** `cp` then `sync`-free: what copying the file costs at least. */
  cpMbPerSec: number;
  /** `FolderBlobStore.put` from the file: streamed, sha256 on the way, fsync, rename. */
  folderStoreMbPerSec: number;
  /** folderStoreMbPerSec / cpMbPerSec. */
  ratio: number;
}

function cp(from: string, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('cp', [from, to], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`cp exited with ${code}`))));
  });
}

/**
 * Writes a file of `mb` MiB of random bytes (incompressible, like a real database's pages
 * would be to a hash), then alternately copies it with `cp` and uploads it to a folder blob
 * store, so the noise of a shared machine hits both alike. `cp` does not fsync; the store
 * does (it must, to be a backup), so the ratio is a floor of what streaming and hashing cost.
 */
export async function benchBlobUpload(opts: { mb: number; rounds: number }): Promise<BlobUploadStats> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-blob-'));
  try {
    const file = path.join(dir, 'source.bin');
    const fd = openSync(file, 'w');
    const chunk = randomBytes(1024 * 1024);
    for (let i = 0; i < opts.mb; i++) writeSync(fd, chunk);
    closeSync(fd);
    const store = new FolderBlobStore(path.join(dir, 'blobs'));
    const cpTimes: number[] = [];
    const putTimes: number[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      let t = performance.now();
      await cp(file, path.join(dir, 'copy.bin'));
      cpTimes.push(performance.now() - t);
      rmSync(path.join(dir, 'copy.bin'));
      t = performance.now();
      await store.put('bench/upload.bin', { file });
      putTimes.push(performance.now() - t);
      await store.delete('bench/upload.bin');
    }
    const mbps = (ms: number[]) =>
      round(
        opts.mb /
          (quantile(
            [...ms].sort((a, b) => a - b),
            0.5,
          ) /
            1000),
        1,
      );
    const cpMbPerSec = mbps(cpTimes);
    const folderStoreMbPerSec = mbps(putTimes);
    return { fileMb: opts.mb, rounds: opts.rounds, cpMbPerSec, folderStoreMbPerSec, ratio: round(folderStoreMbPerSec / cpMbPerSec) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// `node --import tsx bench/blob-upload.ts`: this part alone.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await benchBlobUpload({ mb: Number(process.env.BENCH_BLOB_MB ?? 256), rounds: Number(process.env.BENCH_ROUNDS ?? 5) })));
}
