import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyDir } from '../../src/history/history-files.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { historyTarget } from './history-pool.ts';
import { oneChildPool } from './one-child-pool.ts';
import { fillDisk, mountTmpfs, unmountTmpfs } from './tmpfs.ts';

/** One database whose history folder is a tmpfs of its own (an operator's mount), and a pool for it. */
export interface HistoryOnTmpfs {
  dataDir: string;
  db: DbTarget;
  /** The history folder: the tmpfs's mount point. */
  hdir: string;
  /** Why the mount was refused (the test is then skipped), or undefined. */
  refused: string | undefined;
  pool(): ExecutorPool;
  /** Runs a write under a call key of its own. */
  write(sql: string, params?: unknown[]): ReturnType<ExecutorPool['run']>;
  /** Runs `fn` with history's disk filled, and gives the room back however it ends. */
  whileFull<T>(fn: () => Promise<T>): Promise<T>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Makes a data folder with database `id` and mounts a tmpfs of `size` on its history folder
 * (warning, and `refused` set, where this machine cannot mount); `start` and `stop` are the
 * test's beforeAll and afterAll.
 */
export function historyOnTmpfs(testFile: string, id: string, size = '8m'): HistoryOnTmpfs {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `agentdb-${path.basename(testFile, '.test.ts')}-`));
  const db = historyTarget(dataDir, id);
  const hdir = historyDir(dataDir, db.id);
  fs.mkdirSync(hdir, { recursive: true });
  const refused = mountTmpfs(hdir, size);
  if (refused) console.warn(`${testFile}: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
  let pool: ExecutorPool | undefined;
  let seq = 0;
  return {
    dataDir,
    db,
    hdir,
    refused,
    pool: () => pool!,
    write: (sql, params = []) => pool!.run({ op: 'write', db, sql, params: params as never, callKey: `${id}.k${++seq}` }),
    async whileFull(fn) {
      const filler = path.join(hdir, 'filler');
      const fill = fillDisk(filler);
      try {
        return await fn();
      } finally {
        fs.closeSync(fill.fd);
        fs.rmSync(filler);
      }
    },
    async start() {
      pool = await oneChildPool(dataDir);
    },
    async stop() {
      await pool?.stop();
      if (!refused) unmountTmpfs(hdir);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** What {@link withDirectHistory} makes: history's capture and a handle cache hooked to it. */
export interface DirectHistory {
  history: HistoryCapture;
  handles: HandleCache;
}

/**
 * History's capture and a handle cache of 4 over `h`'s data folder in this process, as an
 * executor child has them, for the tests that call restores directly: made before the describe's
 * tests (`set` receives them) and closed, `h` stopped, after. Answers a write of `sql` on `h.db`
 * through them, captured after.
 */
export function withDirectHistory(h: HistoryOnTmpfs, set: (d: DirectHistory) => void): (sql: string, ...params: unknown[]) => void {
  let d: DirectHistory | undefined;
  beforeAll(() => {
    const history = new HistoryCapture(h.dataDir, { checkpointBytes: 64 * 1024, retentionDays: 30 });
    d = { history, handles: new HandleCache({ size: 4, ...history.hooks() }) };
    set(d);
  });
  afterAll(async () => {
    d?.handles.closeAll();
    await h.stop();
  });
  return (sql, ...params) => {
    const c = d!.handles.open(h.db, 'write');
    c.prepare(sql).run(...params);
    d!.history.run(c, h.db);
  };
}
