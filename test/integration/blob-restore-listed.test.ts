import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activityTable } from '../../src/cli/activity.ts';
import { runBackups } from '../../src/shards/backups.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 36, N14 (N13's leftover): after a restore from the blob store on a new machine,
// `agentdb activity DB` said "(no commits in history)": the restore was no entry of the list,
// so nobody could see that the database was restored, from what, to which moment. A restore in
// place from history is listed. Two machines: the first backs up, the second (its own data
// folder and prefix, the same blob store) restores, through the real queue, workers and executor.

const db = 'acme/scout';
const by = { who: 'operator:test', via: 'operator' as const };
let blobDir: string;
let first: Sandbox;
let second: Sandbox;
const opsOf: ShardOpClient[] = [];

const historyOf = (sb: Sandbox) => {
  const ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  opsOf.push(ops);
  return { ops, history: new HistoryClient(ops, sb.config.shardCount) };
};

beforeAll(async () => {
  blobDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-blob-listed-'));
  first = sandbox({ BLOB_DIR: blobDir });
  await first.pool();
  const client = first.client();
  const write = (sql: string) =>
    client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never);
  expect(await write('CREATE TABLE t (v INTEGER)')).toMatchObject({ ok: true });
  for (let i = 0; i < 3; i++) expect(await write(`INSERT INTO t VALUES (${i})`)).toMatchObject({ ok: true });
  const { ops } = historyOf(first);
  const run = await runBackups(ops, first.config.shardCount, { db, reason: 'manual' });
  expect(run.failed).toEqual([]);
  second = sandbox({ BLOB_DIR: blobDir });
  await second.pool();
}, 120_000);

afterAll(async () => {
  await Promise.all(opsOf.map((o) => o.close()));
  await first?.cleanup();
  await second?.cleanup();
  fs.rmSync(blobDir, { recursive: true, force: true });
});

describe('a restore from the blob store on a new machine', () => {
  it('is an entry of the activity list, saying from which backup and to which moment', async () => {
    const { history } = historyOf(second);
    const done = (await history.restoreFromBlob(db, { by }, 'operator')) as { restoredTo: string };
    const page = await history.activity(db, {}, 'operator');
    expect(page.entries).toHaveLength(1);
    const [entry] = page.entries;
    expect(entry).toMatchObject({ kind: 'restore', by: by.who, tool: 'RESTORE' });
    expect(entry!.statement).toMatch(new RegExp(`^restore to ${done.restoredTo} from the backup of ${db} in folder:`));
    // As `agentdb activity` prints it: the restore's line, not "(no commits in history)".
    const table = activityTable(page);
    expect(table).not.toContain('(no commits in history)');
    expect(table).toContain(`restore to ${done.restoredTo} from the backup`);
    // A call after it is listed above it, each with its own row.
    const call = await second.client().call({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'agent' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'INSERT INTO t VALUES (7)' },
    } as never);
    expect(call).toMatchObject({ ok: true });
    const after = (await history.activity(db, {}, 'operator')).entries;
    expect(after.map((e) => [e.kind, e.statement?.slice(0, 24)])).toEqual([
      ['call', 'INSERT INTO t VALUES (7)'],
      ['restore', `restore to ${done.restoredTo}`.slice(0, 24)],
    ]);
  });
});
