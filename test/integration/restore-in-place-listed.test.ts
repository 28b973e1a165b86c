import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { activityTable } from '../../src/cli/activity.ts';
import { pruneHistory } from '../../src/history/prune.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 37, N15: two restores in place that `agentdb activity` did not list, so nobody could see
// the database had been restored. (1, N14's leftover) One that copied a file in is listed because
// a generation comes before its own; once retention pruned those, its generation's snapshot
// (stamped when the restore published it, after the restore's row) took every row before it, the
// restore's own too. (2) One that went in through SQLite, a program outside agentdb holding the
// file open: its generation begins from a snapshot of the file with no base commit, and that
// snapshot took its row, shown only for a gap. Through the real queue, workers, executor and
// history; the prune is the worker's own function run on the data folder with a clock a month on.

const DAY = 24 * 3600 * 1000;
const by = { who: 'operator:test', via: 'operator' as const };
let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;
let history: HistoryClient;
const outside: Database.Database[] = [];

const write = (agent: string, sql: string) =>
  client.call({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never);
const listed = async (db: string) => (await history.activity(db, {}, 'operator')).entries.map((e) => [e.kind, e.statement?.slice(0, 24)]);

/** A table whose every page its last write changed: a restore to before that write copies a file in, a generation of its own. */
async function rewritten(agent: string): Promise<void> {
  expect(await write(agent, 'CREATE TABLE b (x BLOB)')).toMatchObject({ ok: true });
  const fill = 'INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 300) SELECT zeroblob(3000) FROM c';
  expect(await write(agent, fill)).toMatchObject({ ok: true });
  expect(await write(agent, 'UPDATE b SET x = randomblob(3000)')).toMatchObject({ ok: true });
}

/**
 * Restores `acme/<agent>` to just before its last write, writes once after it, and checks the top
 * of the list: that write, then the restore. Answers those two lines.
 */
async function restored(agent: string): Promise<unknown[][]> {
  const db = `acme/${agent}`;
  const update = (await history.activity(db, {}, 'operator')).entries.find((e) => e.statement === 'UPDATE b SET x = randomblob(3000)')!;
  const done = (await history.restore(db, { before: update.id, by }, 'operator')) as { restoredTo: string };
  expect((await history.history(db, 'operator')).generations.map((g) => g.reason)).toEqual(['first', 'restore']);
  expect(await write(agent, 'INSERT INTO b VALUES (9)')).toMatchObject({ ok: true });
  const top = [
    ['call', 'INSERT INTO b VALUES (9)'],
    ['restore', `restore to ${done.restoredTo}`.slice(0, 24)],
  ];
  expect((await listed(db)).slice(0, 2)).toEqual(top);
  return top;
}

/** A month on: every generation before the restore's is past the window and goes. */
function pruned(): void {
  expect(pruneHistory(sb.dataDir, { now: Date.now() + 31 * DAY, retentionDays: 30 }).generations).toBeGreaterThanOrEqual(1);
}

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  history = new HistoryClient(ops, sb.config.shardCount);
}, 120_000);

afterAll(async () => {
  for (const conn of outside) conn.close();
  await ops.close();
  await sb.cleanup();
});

describe('a restore in place whose generation is the oldest left after pruning', () => {
  it('is still an entry of the activity list, with the call made after it', async () => {
    await rewritten('scout');
    const top = await restored('scout');
    pruned();
    expect((await listed('acme/scout')).slice(0, 2)).toEqual(top);
    expect(activityTable(await history.activity('acme/scout', {}, 'operator'))).toContain(top[1]![1]);
  });
});

describe('a restore in place while a program outside agentdb holds the file open', () => {
  it('is an entry of the activity list: its generation, before it the state it replaced', async () => {
    await rewritten('held');
    const shards = path.join(sb.dataDir, 'shards');
    const file = fs
      .readdirSync(shards)
      .map((n) => path.join(shards, n, 'acme', 'held.sqlite'))
      .find((f) => fs.existsSync(f))!;
    // Another process's connection, as `sqlite3` on the file would be: the pages go in through SQLite.
    const conn = new Database(file, { fileMustExist: true });
    outside.push(conn);
    expect(conn.prepare('SELECT count(*) AS n FROM b').get()).toEqual({ n: 300 });
    const update = (await history.activity('acme/held', {}, 'operator')).entries.find((e) => e.statement === 'UPDATE b SET x = randomblob(3000)')!;
    await restored('held');
    const entry = (await history.activity('acme/held', {}, 'operator')).entries[1]!;
    expect(entry).toMatchObject({ kind: 'restore', by: by.who, tool: 'RESTORE', restoreBefore: update.id });
    expect(entry.id).toMatch(/^g0000000002~/);
    // Its id and the state before it are positions a restore takes, as every entry's are.
    const back = await history.restore('acme/held', { before: entry.id, dryRun: true, by }, 'operator');
    expect(back).toMatchObject({ keeps: update.id, after: { count: 2 } });
    expect(await history.restore('acme/held', { through: entry.id, dryRun: true, by }, 'operator')).toMatchObject({ keeps: entry.id, after: { count: 1 } });
  });
});
