import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { activityTable } from '../../src/cli/activity.ts';
import { pruneHistory } from '../../src/history/prune.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 37, N15 (N14's leftover): a restore in place is an entry of the activity list because a
// generation comes before its own. Once retention pruned those, the restore's generation is the
// oldest kept, its snapshot (stamped when the restore published it, after the restore's row) took
// every row before it, the restore's own too: `agentdb activity` no longer said the database had
// been restored. Through the real queue, workers, executor and history; the prune is the worker's
// own function run on the data folder with a clock a month on.

const DAY = 24 * 3600 * 1000;
const db = 'acme/scout';
const by = { who: 'operator:test', via: 'operator' as const };
let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;
let history: HistoryClient;

const write = (sql: string) =>
  client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never);

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  history = new HistoryClient(ops, sb.config.shardCount);
  expect(await write('CREATE TABLE b (x BLOB)')).toMatchObject({ ok: true });
  expect(await write('INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 300) SELECT zeroblob(3000) FROM c')).toMatchObject(
    {
      ok: true,
    },
  );
  // Every page changes: a restore to before it rebuilds the file, a generation of its own.
  expect(await write('UPDATE b SET x = randomblob(3000)')).toMatchObject({ ok: true });
}, 120_000);

afterAll(async () => {
  await ops.close();
  await sb.cleanup();
});

describe('a restore in place whose generation is the oldest left after pruning', () => {
  it('is still an entry of the activity list, with the call made after it', async () => {
    const entries = (await history.activity(db, {}, 'operator')).entries;
    const update = entries.find((e) => e.statement === 'UPDATE b SET x = randomblob(3000)')!;
    const done = (await history.restore(db, { before: update.id, by }, 'operator')) as { restoredTo: string };
    expect((await history.history(db, 'operator')).generations.map((g) => g.reason)).toEqual(['first', 'restore']);
    expect(await write('INSERT INTO b VALUES (9)')).toMatchObject({ ok: true });
    const listed = async () => (await history.activity(db, {}, 'operator')).entries.map((e) => [e.kind, e.statement?.slice(0, 24)]);
    const restoreLine = ['restore', `restore to ${done.restoredTo}`.slice(0, 24)];
    expect((await listed()).slice(0, 2)).toEqual([['call', 'INSERT INTO b VALUES (9)'], restoreLine]);

    // A month on: every generation before the restore's is past the window and goes.
    const report = pruneHistory(sb.dataDir, { now: Date.now() + 31 * DAY, retentionDays: 30 });
    expect(report.generations).toBeGreaterThanOrEqual(1);
    const page = await history.activity(db, {}, 'operator');
    expect((await listed()).slice(0, 2)).toEqual([['call', 'INSERT INTO b VALUES (9)'], restoreLine]);
    expect(activityTable(page)).toContain(`restore to ${done.restoredTo}`);
  });
});
