import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { historyOpHandlers } from '../../src/shards/ops/history-ops.ts';
import type { ShardOpContext } from '../../src/shards/ops/shard-ops.ts';
import { withHistoryPoolTarget } from '../helpers/history-pool.ts';

// Session 29, L3: a restore was planned twice, once by the dry run the quota weighed and again by
// the restore itself, and what the second plan added was never weighed. A restore in place adds
// less the larger the file it replaces (restore-room.ts): a file shrunk between the two (a VACUUM
// from outside agentdb) let a restore add more than the quota had weighed. The restore now runs
// the plan weighed, and is refused when what it would add has grown since.
const SHARDS = 4;
const ID = 'acme/a';
const by = { who: 'operator:test', via: 'operator' as const };
let dataDir: string;
let pool: ExecutorPool;
let db: DbTarget;
let write: (sql: string) => Promise<unknown>;

withHistoryPoolTarget(
  'agentdb-weighed-',
  { handleCacheSize: 8, checkpointBytes: 64 * 1024 * 1024 },
  { id: ID, shards: SHARDS, limits: PLAN_LIMITS.enterprise },
  (t) => ({ dataDir, pool, db, write } = t),
);

it('runs the plan its quota weighed, and refuses a restore that would now add more than was weighed', async () => {
  await write('CREATE TABLE t (b BLOB)');
  await write('INSERT INTO t SELECT randomblob(100000) FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4)');
  const full = Date.now();
  await write('DELETE FROM t');
  // The file keeps its 400 KB of pages; back to `full`, a restore in place adds about that.
  const used = workspaceDiskUse(dataDir, 'acme');
  const onDisk = used.databaseBytes + used.historyBytes + used.ledgerBytes;
  // Room for what the restore adds with the file as it is (about 400 KB), not for twice that.
  const quota = new WorkspaceQuota({ dataDir, overrides: { maxBytes: onDisk + 600_000 }, planOf: async () => 'pro' });
  const asked: ExecRequest[] = [];
  const executor = {
    run: async (req: ExecRequest) => {
      asked.push(req);
      const out = await pool.run(req);
      // Between the plan the quota weighed and the restore: the file shrinks, from outside agentdb.
      if (req.op === 'restore' && req.dryRun) {
        const outside = new Database(db.path);
        outside.exec('VACUUM');
        outside.close();
      }
      return out;
    },
  };
  const config = { dataDir, shardCount: SHARDS, historyRetentionDays: 30 } as unknown as Config;
  const logger = { info() {}, warn() {}, error() {}, debug() {} };
  const ctx = { shard: db.shard, config, executor, logger, quota, job: {} } as unknown as ShardOpContext;
  const out = await historyOpHandlers().historyRestore!({ db: ID, args: { at: full, by } } as never, ctx).catch((err: unknown) => err);
  expect(out).toMatchObject({
    code: 'QUOTA_EXCEEDED',
    detail: expect.stringMatching(/^restore of acme\/a in place refused: the database shrank from \d+ to \d+ bytes/),
  });
  // The restore was handed the plan weighed, not left to plan its own.
  expect(asked.map((r) => r.op === 'restore' && { dryRun: r.dryRun, weighed: r.weighed !== undefined })).toEqual([
    { dryRun: true, weighed: false },
    { dryRun: false, weighed: true },
  ]);
  const rows = new Database(db.path, { readonly: true });
  expect(rows.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 0 });
  rows.close();
});
