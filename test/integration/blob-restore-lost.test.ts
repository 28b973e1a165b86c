import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { runBackups } from '../../src/shards/backups.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { HistoryClient, type HistoryView } from '../../src/shards/history-client.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Issue 25 part 1: a `gap` generation that lost commits makes every restore refuse the lost
// moments — `restore --from-blob` too (src/history/blob-restore.ts hands the plan the gap's
// meta), never the older state answered as ok. A moment inside the stretch answers HISTORY_LOST,
// into a new database and as a dry run; moments on either side restore.

const DB = 'acme/scout';
const by = { who: 'operator:blob-lost-test', via: 'operator' as const };

let sb: Sandbox;
let pool: ShardWorkerPool;
let client: AgentDbClient;
let ops: ShardOpClient;
let history: HistoryClient;
let blobDir: string;
let view: HistoryView;

const write = async (sql: string) => {
  const env = await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(env.ok, JSON.stringify(env)).toBe(true);
};

async function refusal(at: number, opts: { into: string; dryRun?: boolean }): Promise<string | undefined> {
  try {
    await history.restoreFromBlob(DB, { at: new Date(at).toISOString(), ...opts, by }, 'operator');
    return undefined;
  } catch (err) {
    return codeOf(err);
  }
}

function rowsOf(id: string): number[] {
  const [ws, agent] = id.split('/');
  const d = new Database(databasePath(sb.dataDir, ws!, agent, shardOf(id, sb.config.shardCount)), { readonly: true, fileMustExist: true });
  try {
    return d.prepare('SELECT a FROM t ORDER BY a').pluck().all() as number[];
  } finally {
    d.close();
  }
}

beforeAll(async () => {
  blobDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-blob-lost-'));
  sb = sandbox({ SHARD_COUNT: '2', BLOB_DIR: blobDir, HISTORY_CAPTURE: 'on', LOCK_DURATION_MS: '30000', STALLED_INTERVAL_MS: '30000' });
  pool = await sb.pool();
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  history = new HistoryClient(ops, sb.config.shardCount);
  await write('CREATE TABLE t(a)');
  for (let i = 0; i < 3; i++) await write(`INSERT INTO t VALUES (${i})`);
  // Every handle closed (the worker stops), then another program writes the file: the next
  // capture begins a `gap` generation that lost that commit.
  await pool.stop();
  const outside = new Database(databasePath(sb.dataDir, 'acme', 'scout', shardOf(DB, sb.config.shardCount)));
  outside.prepare('INSERT INTO t VALUES (99)').run();
  outside.close();
  pool = await sb.pool();
  await write('INSERT INTO t VALUES (100)');
  view = await history.history(DB, 'operator');
  const run = await runBackups(ops, sb.config.shardCount, { db: DB });
  expect(run.failed).toEqual([]);
}, 60_000);

afterAll(async () => {
  await ops?.close();
  await sb?.cleanup();
  if (blobDir) fs.rmSync(blobDir, { recursive: true, force: true });
});

describe('restore --from-blob across a lost stretch', () => {
  it('answers HISTORY_LOST for a moment inside it, into a new database and as a dry run, and creates nothing', async () => {
    expect(view.lost).toHaveLength(1);
    const after = Date.parse(view.lost[0]!.after);
    const before = Date.parse(view.lost[0]!.before);
    expect(before - after).toBeGreaterThan(1);
    for (const at of [after + 1, Math.floor((after + before) / 2), before - 1]) {
      expect(await refusal(at, { into: 'acme/lost1', dryRun: true }), new Date(at).toISOString()).toBe('HISTORY_LOST');
      expect(await refusal(at, { into: 'acme/lost1' }), new Date(at).toISOString()).toBe('HISTORY_LOST');
    }
    expect(fs.existsSync(databasePath(sb.dataDir, 'acme', 'lost1', shardOf('acme/lost1', sb.config.shardCount)))).toBe(false);
  });

  it('restores the moments on either side: the last commit history holds, and after the gap began', async () => {
    await history.restoreFromBlob(DB, { at: view.lost[0]!.after, into: 'acme/before', by }, 'operator');
    expect(rowsOf('acme/before')).toEqual([0, 1, 2]);
    await history.restoreFromBlob(DB, { at: view.latest!, into: 'acme/latest', by }, 'operator');
    expect(rowsOf('acme/latest')).toEqual([0, 1, 2, 99, 100]);
  });
});
