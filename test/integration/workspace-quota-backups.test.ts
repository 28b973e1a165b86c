import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import { runBackups } from '../../src/shards/backups.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { codeOf } from '../../src/errors.ts';
import { shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Review L2: `agentdb backup now` on a workspace past its byte quota adds a snapshot. Backups
// are the operator's and protect the data: never refused for the quota. The snapshot a backup
// begins is history on the data disk and counts as history does; the blob store's copies do
// not. Past the quota a backup adds at most one snapshot per database (of the commits made
// before the refusals): writes are refused there, and a snapshot is taken only after commits.
let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;

beforeAll(async () => {
  sb = sandbox({ WORKSPACE_MAX_BYTES: '400000', BLOB_STORE: 'folder', HISTORY_CAPTURE: 'on' });
  await sb.pool(undefined, { BLOB_DIR: path.join(sb.dataDir, 'blobs') }, { writesVerdictKeepMs: 0 });
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
});
afterAll(async () => {
  await ops.close();
  await sb.cleanup();
});

const write = (sql: string) => client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
const generations = () => listGenerations(localSource(sb.config.dataDir, 'acme/scout')).length;

describe('backups of a workspace past its byte quota (WORKSPACE_MAX_BYTES)', () => {
  it('are never refused; the snapshot one begins counts as history, once, and a second adds nothing', async () => {
    expect((await write('CREATE TABLE t (b BLOB)')).ok).toBe(true);
    expect((await write('INSERT INTO t SELECT randomblob(500000)')).ok).toBe(true);
    const refused = await write('INSERT INTO t VALUES (1)');
    expect(refused).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    const before = workspaceDiskUse(sb.config.dataDir, 'acme');
    const gens = generations();

    const first = await runBackups(ops, sb.config.shardCount, { db: 'acme/scout', reason: 'manual' });
    expect(first.failed).toEqual([]);
    expect(first.databases).toMatchObject([{ database: 'acme/scout', unchanged: false }]);
    expect(first.databases[0]!.error).toBeUndefined();
    expect(first.databases[0]!.snapshot).toBeUndefined();
    // A snapshot of the ~500 KB file, counted in history: the blob store's copy is not counted.
    expect(generations()).toBe(gens + 1);
    const after = workspaceDiskUse(sb.config.dataDir, 'acme');
    expect(after.historyBytes - before.historyBytes).toBeGreaterThan(500_000);
    expect(fs.existsSync(path.join(sb.dataDir, 'blobs'))).toBe(true);

    // Nothing was committed since (writes are refused): no second snapshot, no byte more.
    const second = await runBackups(ops, sb.config.shardCount, { db: 'acme/scout', reason: 'manual' });
    expect(second.failed).toEqual([]);
    expect(second.databases).toMatchObject([{ database: 'acme/scout', unchanged: true }]);
    expect(generations()).toBe(gens + 1);
    expect(workspaceDiskUse(sb.config.dataDir, 'acme').historyBytes).toBe(after.historyBytes);
    expect(await write('INSERT INTO t VALUES (2)')).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
  });

  it('a fork from the blob store is weighed with the bytes it adds (file, snapshot, base commit), dry run alike', async () => {
    // Under the quota: a ~40 KB database and its history. The fork adds ~3 × 40 KB, past it;
    // checked only for the databases it adds and a workspace already past its bytes, it passed.
    const slim = (sql: string) =>
      client.call({ workspace: 'slim', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
    expect((await slim('CREATE TABLE t (b BLOB)')).ok).toBe(true);
    expect((await slim('INSERT INTO t SELECT randomblob(40000)')).ok).toBe(true);
    expect((await runBackups(ops, sb.config.shardCount, { db: 'slim/scout', reason: 'manual' })).failed).toEqual([]);
    const u = workspaceDiskUse(sb.config.dataDir, 'slim');
    expect(u.databaseBytes + u.historyBytes + u.ledgerBytes).toBeLessThan(400_000);
    const history = new HistoryClient(ops, sb.config.shardCount);
    const by = { who: 'operator:test', via: 'operator' as const };
    const dry = (await history.restoreFromBlob('slim/scout', { into: 'slim/copy', dryRun: true, by }, 'operator')) as { refused?: string };
    expect(dry.refused).toMatch(
      /^QUOTA_EXCEEDED: restore from the blob store of slim\/scout into slim\/copy refused: workspace slim holds \d+ bytes on disk and this would add about \d+/,
    );
    const real = await history.restoreFromBlob('slim/scout', { into: 'slim/copy', by }, 'operator').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(codeOf(real)).toBe('QUOTA_EXCEEDED');
    expect(workspaceDiskUse(sb.config.dataDir, 'slim').databases).toEqual(['slim/scout']);
  });

  it('two forks from the blob store at once that fit only one by one: one is refused (each holds its room until done)', async () => {
    const twin = (sql: string) =>
      client.call({ workspace: 'twin', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
    expect((await twin('CREATE TABLE t (b BLOB)')).ok).toBe(true);
    expect((await twin('INSERT INTO t SELECT randomblob(32000)')).ok).toBe(true);
    expect((await runBackups(ops, sb.config.shardCount, { db: 'twin/scout', reason: 'manual' })).failed).toEqual([]);
    const history = new HistoryClient(ops, sb.config.shardCount);
    const by = { who: 'operator:test', via: 'operator' as const };
    // Targets on two shards, so on two of the pool's workers, which share its quota.
    const targets = ['twin/a', 'twin/b', 'twin/c', 'twin/d', 'twin/e', 'twin/f'];
    const [one, two] = targets.filter((t, i) => targets.findIndex((o) => shardOf(o, sb.config.shardCount) === shardOf(t, sb.config.shardCount)) === i);
    for (const into of [one!, two!]) {
      const dry = (await history.restoreFromBlob('twin/scout', { into, dryRun: true, by }, 'operator')) as { refused?: string };
      expect(dry.refused).toBeUndefined();
    }
    const both = await Promise.allSettled([one!, two!].map((into) => history.restoreFromBlob('twin/scout', { into, by }, 'operator')));
    const u = workspaceDiskUse(sb.config.dataDir, 'twin');
    console.log(
      `two blob forks at once: ${both.map((r) => r.status).join(', ')}; the workspace holds ${u.databaseBytes + u.historyBytes + u.ledgerBytes} bytes of 400000`,
    );
    expect(both.map((r) => (r.status === 'rejected' ? codeOf(r.reason) : 'ok')).sort()).toEqual(['QUOTA_EXCEEDED', 'ok']);
  });
});
