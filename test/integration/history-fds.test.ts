import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// Capture keeps the files of the segment it appends to open while the database's handle is:
// with many databases through few handles, the open files stay bounded by the handles.
let dataDir: string;
let pool: ExecutorPool;
beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-fds-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 64 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('history capture with many databases', () => {
  it('keeps open files bounded by the handle cache, not by the databases written', async () => {
    // The descriptors of files in the data folder: the children's own (their channels, the
    // threads they start as they run, such as the parent watch at a first request) are not what
    // is bounded.
    const inData = (pid: number) =>
      fs.readdirSync(`/proc/${pid}/fd`).filter((fd) => {
        try {
          return fs.readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith(dataDir);
        } catch {
          return false; // closed between the listing and the read
        }
      }).length;
    const openFiles = () => pool.pids.reduce((n, pid) => n + inData(pid), 0);
    const baseline = openFiles();
    let most = baseline;
    let seq = 0;
    for (let i = 0; i < 120; i++) {
      const db = historyTarget(dataDir, `fds/a${i}`);
      await mustRun(pool, { op: 'write', db, sql: 'CREATE TABLE t (v TEXT)', params: [], callKey: `f${++seq}` });
      await mustRun(pool, { op: 'write', db, sql: 'INSERT INTO t VALUES (?)', params: ['x'], callKey: `f${++seq}` });
      most = Math.max(most, openFiles());
    }
    // Per open handle: SQLite's file, -wal and -shm; capture's view of the -wal; the segment's data
    // and index files; the record of the last commit answered before its copy and capture's view of
    // the -shm it reads where that commit ends from (`answered-commits.ts`); and, once its first
    // snapshot was copied, the database file's own, kept while the handle is open: closing it would
    // let go SQLite's lock on the file (`kept-descriptors.ts`).
    expect(most - baseline).toBeLessThanOrEqual(pool.pids.length * 4 * 9);
  });
});
