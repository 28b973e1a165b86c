import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { backupDatabase } from '../../src/history/backup.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { blobRestoreOp } from '../../src/shards/ops/blob-restore-op.ts';
import { historyOpHandlers } from '../../src/shards/ops/history-ops.ts';
import type { ShardOpContext } from '../../src/shards/ops/shard-ops.ts';
import type { Config } from '../../src/config.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const SHARDS = 8;

function ctxFor(dataDir: string, shard: number, ran: unknown[] = []): ShardOpContext {
  const config = { dataDir, shardCount: SHARDS, historyRetentionDays: 30, blob: { kind: 'folder', dir: path.join(dataDir, 'blobs') } } as unknown as Config;
  const executor = { run: async (req: unknown) => (ran.push(req), { ok: true, result: {} }) };
  const logger = { info() {}, warn() {}, error() {}, debug() {} };
  return { shard, config, executor, logger, job: {} } as unknown as ShardOpContext;
}

function withDatabase(id: string) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-h2-'));
  dirs.push(dataDir);
  const history = new HistoryCapture(dataDir, { checkpointBytes: 64 * 1024 * 1024, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  const [workspace, agent] = id.split('/');
  const db: DbTarget = { id, path: databasePath(dataDir, workspace!, agent, shardOf(id, SHARDS)), shard: shardOf(id, SHARDS), limits: PLAN_LIMITS.enterprise };
  const h = handles.open(db, 'write');
  h.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  history.run(h, db);
  h.prepare('INSERT INTO t (v) VALUES (?)').run('secret');
  history.run(h, db);
  handles.closeAll();
  return { dataDir, db };
}

describe('history shard ops sent straight through Redis', () => {
  it('restoreFromBlob refuses a database of another shard (it would check and create the wrong file)', async () => {
    const id = 'acme/a';
    const { dataDir, db } = withDatabase(id);
    const store = new FolderBlobStore(path.join(dataDir, 'blobs'));
    await backupDatabase(store, dataDir, id);
    const wrong = (db.shard + 1) % SHARDS;
    // The database exists on its own shard: sent to another one, the op must not "restore" it
    // a second time into a folder nothing reads.
    const out = await blobRestoreOp({ db: id, args: {} } as never, ctxFor(dataDir, wrong)).catch((e) => e);
    expect(out).toMatchObject({ code: 'INVALID_ARGUMENTS' });
    expect(fs.existsSync(databasePath(dataDir, 'acme', 'a', wrong))).toBe(false);
  });

  it('historyRestore refuses a fork into another workspace', async () => {
    const id = 'acme/a';
    const { dataDir } = withDatabase(id);
    const into = 'evil/x';
    const ran: unknown[] = [];
    const out = await historyOpHandlers().historyRestore!(
      { db: id, args: { at: Date.now(), into, by: { who: 'mallory', via: 'operator' } } } as never,
      ctxFor(dataDir, shardOf(into, SHARDS), ran),
    ).catch((e) => e);
    expect(out).toMatchObject({ code: 'INVALID_ARGUMENTS' });
    expect(ran).toEqual([]);
  });

  it('historyRestore refuses a fork into the database it restores from', async () => {
    const id = 'acme/a';
    const { dataDir } = withDatabase(id);
    const ran: unknown[] = [];
    const out = await historyOpHandlers().historyRestore!(
      { db: id, args: { at: Date.now(), into: id, by: { who: 'mallory', via: 'operator' } } } as never,
      ctxFor(dataDir, shardOf(id, SHARDS), ran),
    ).catch((e) => e);
    expect(out).toMatchObject({ code: 'DATABASE_EXISTS' });
    expect(ran).toEqual([]);
  });
});
