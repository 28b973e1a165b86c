import { afterAll, beforeAll, expect, it } from 'vitest';
import { activityTable } from '../../src/cli/activity.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// `agentdb activity` listed each entry's "restore before" and `agentdb history` each commit's
// "position", and both went to `restore --through`: the one undid the commit of its row, the
// other kept it (session 32, N8). Both lists now give the same position for a commit (its own),
// `--through` keeps it, `--before` undoes it; a `restoreBefore` kept from before still goes to
// `--through` with the meaning it had.
const DB = 'acme/scout';

let box: Sandbox;
let ops: ShardOpClient;
let history: HistoryClient;
const by = { who: 'operator:n8', via: 'operator' as const };

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  history = new HistoryClient(ops, box.config.shardCount);
  const client = box.client();
  for (const sql of ['CREATE TABLE t (a)', 'INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (2)'])
    expect(await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject(
      {
        ok: true,
      },
    );
}, 60_000);

afterAll(async () => {
  await ops?.close();
  await box?.cleanup();
});

it('--through a position keeps its commit, --before the same position undoes it, whichever list gave it', { timeout: 60_000 }, async () => {
  const page = await history.activity(DB, {}, 'operator');
  const [second, first] = page.entries;
  const listed = (await history.history(DB, 'operator')).recentCommits.map((c) => c.position);
  // The history list and the activity list name a commit by the same position.
  expect(listed).toContain(second!.id);

  const through = await history.restore(DB, { through: second!.id, dryRun: true, by }, 'operator');
  expect(through.keeps).toBe(second!.id);
  expect(through.after!.entries).toHaveLength(0);

  const before = await history.restore(DB, { before: second!.id, dryRun: true, by }, 'operator');
  expect(before.keeps).toBe(second!.restoreBefore);
  expect(before.after!.entries.map((e) => e.id)).toEqual([second!.id]);
  expect(before.keeps).toBe(first!.id);

  // The old spelling: an entry's restoreBefore given to `through` still means the state before it.
  const old = await history.restore(DB, { through: second!.restoreBefore, dryRun: true, by }, 'operator');
  expect(old.keeps).toBe(before.keeps);

  // And done: the insert of 2 undone, the insert of 1 kept.
  const done = await history.restore(DB, { before: second!.id, by }, 'operator');
  expect(done.undoId).toBeTruthy();
  const rows = await box
    .client()
    .call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT a FROM t' } });
  expect(rows).toMatchObject({ ok: true, result: { rows: [[1]] } });
});

it('refuses --before a position that is no entry of the list', { timeout: 60_000 }, async () => {
  await expect(history.restore(DB, { before: 'g0000000099.00000001.0', dryRun: true, by }, 'operator')).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
});

it("`agentdb activity` prints each entry's own position and both flags, as `agentdb history` does", async () => {
  const page = await history.activity(DB, {}, 'operator');
  const text = activityTable(page);
  expect(text.split('\n')[1]!.split('\t').at(-1)).toBe('position');
  for (const e of page.entries) expect(text).toContain(e.id);
  expect(text).not.toContain(page.entries.at(-1)!.restoreBefore);
  expect(text).toContain(`agentdb restore ${DB} --before <its position>`);
  expect(text).toContain('--through <its position>');
});
