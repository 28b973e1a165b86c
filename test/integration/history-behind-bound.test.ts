import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { historyDir, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { loadConfig } from '../../src/config.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { ExecRequest } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { pastMs } from '../helpers/history.ts';
import { mountTmpfs, growTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// A database whose history copies keep failing while its own disk has room (history on another,
// full volume here: a 1 MB tmpfs mounted on its history folder): the write is answered ok while
// its frames wait in the WAL, which is never checkpointed before they are copied — up to a bound
// (HISTORY_MAX_BEHIND_BYTES, 64 MiB by default, 256 KiB here). Past it, writes answer
// STORAGE_FULL with nothing written, and resume by themselves once a copy works again; no
// acknowledged write is missing from the data or from a restore.

const BOUND = 256 * 1024;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-behind-'));
const db = historyTarget(dataDir, 'behind/a');
const mnt = historyDir(dataDir, db.id);
fs.mkdirSync(mnt, { recursive: true });
const refused = mountTmpfs(mnt, '1m');
if (refused) {
  fs.rmSync(dataDir, { recursive: true, force: true });
  console.warn(`history-behind-bound.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
}

describe.runIf(!refused)('a history that falls behind its WAL', () => {
  let pool: ExecutorPool;
  let seq = 0;
  const acked: number[] = [];
  const refusedKs: { k: number; code: string }[] = [];

  const write = async (k: number) => {
    const req: ExecRequest = { op: 'write', db, sql: 'INSERT INTO t (k, v) VALUES (?, ?)', params: [k, `${k}:`.padEnd(3000, 'x')], callKey: `k${++seq}` };
    const out = await pool.run(req);
    if (out.ok) acked.push(k);
    else refusedKs.push({ k, code: out.error.code });
    return out;
  };

  beforeAll(async () => {
    pool = await oneChildPool(dataDir, { maxBehindBytes: BOUND });
    const made = await pool.run({
      op: 'write',
      db,
      sql: 'CREATE TABLE t (seq INTEGER PRIMARY KEY, k INTEGER NOT NULL, v TEXT NOT NULL)',
      params: [],
      callKey: 'create',
    });
    expect(made.ok, JSON.stringify(made)).toBe(true);
  });

  afterAll(async () => {
    await pool?.stop();
    if (!refused) {
      unmountTmpfs(mnt);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('is the configured bound (HISTORY_MAX_BEHIND_BYTES), 64 MiB by default', () => {
    expect(loadConfig({}).history).toMatchObject({ maxBehindBytes: 64 * 1024 * 1024 });
    expect(loadConfig({ HISTORY_MAX_BEHIND_BYTES: String(BOUND) }).history).toMatchObject({ maxBehindBytes: BOUND });
  });

  it('answers writes ok while the WAL holds their frames, STORAGE_FULL once it holds the bound, and writes again once copies work', async () => {
    // Until history's volume is full, then until the WAL passes the bound: a few hundred writes.
    const startedAt = Date.now();
    expect(pool.captureLagSeconds()).toBe(0);
    let k = 0;
    let walAtFirstRefusal = 0;
    for (; k < 2000 && refusedKs.length < 5; k++) {
      await write(k);
      if (refusedKs.length === 1 && !walAtFirstRefusal) walAtFirstRefusal = fs.statSync(`${db.path}-wal`).size;
    }
    expect(refusedKs.length, 'no write was refused: the bound was never reached').toBeGreaterThan(0);
    expect(new Set(refusedKs.map((r) => r.code))).toEqual(new Set(['STORAGE_FULL']));
    const wal = fs.statSync(`${db.path}-wal`).size;
    expect(wal).toBeGreaterThanOrEqual(BOUND);
    // The WAL (checkpointed at 64 KiB while copies worked) stopped at the bound, give or take a
    // write: the refused writes added nothing.
    expect(wal).toBeLessThan(BOUND + 64 * 1024);
    expect(wal).toBe(walAtFirstRefusal);
    const atFull = Date.now();
    pastMs(atFull);
    // Operators see it: the oldest commit history lacks has waited since the first failed copy.
    const lag = pool.captureLagSeconds();
    expect(lag).toBeGreaterThan(0);
    expect(lag).toBeLessThan((Date.now() - startedAt) / 1000);

    // Room comes back on history's volume: the next write copies the backlog, and is taken.
    growTmpfs(mnt, '64m');
    for (let i = 0; i < 5; i++, k++) expect((await write(k)).ok).toBe(true);
    expect(pool.captureLagSeconds()).toBe(0);

    // Every acknowledged write, once, and none refused.
    const live = new Database(db.path, { readonly: true });
    try {
      expect(live.prepare('SELECT k FROM t ORDER BY seq').pluck().all()).toEqual(acked);
    } finally {
      live.close();
    }
    // And history holds them, at the moment the writes were refused too.
    const file = path.join(dataDir, 'restored.sqlite');
    buildRestore(planRestore(localSource(dataDir, db.id), { at: atFull }), file);
    const restored = new Database(file, { readonly: true });
    try {
      expect(restored.prepare('SELECT k FROM t ORDER BY seq').pluck().all()).toEqual(acked.slice(0, acked.length - 5));
    } finally {
      restored.close();
    }
  });
});
