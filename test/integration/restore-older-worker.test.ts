import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { dryRunText, restoredText } from '../../src/cli/restore-text.ts';
import { shardOf } from '../../src/contracts/database-id.ts';
import { AgentDbError } from '../../src/errors.ts';
import { ACTIVITY_PAGE } from '../../src/history/activity-view.ts';
import { RESTORE_PREVIEW_ENTRIES } from '../../src/history/restore-preview.ts';
import type { ActivityEntry, HistoryClient } from '../../src/shards/history-client.ts';
import { shardOpHandlers, type ShardOpHandler } from '../../src/shards/ops/shard-ops.ts';
import type { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';

// Session 36, N14: N13 gave the activity page an `after: <state>` a restore reads what it takes
// away with. During a rolling deploy a worker still on the older build refuses that key (its
// arguments are strict), so a dry run said "not listed: INVALID_ARGUMENTS" and a restore done
// printed no count until every worker was new. Here the database's worker answers the page as
// the build before N13 did (its argument schema, copied from 810b4516), through the real queue,
// worker, executor and history; the new caller asks it the page it knows.

const olderArgs = z
  .object({
    limit: z.number().int().min(1).max(ACTIVITY_PAGE.max).optional(),
    before: z.string().min(1).max(200).optional(),
    at: z.string().min(1).max(200).optional(),
  })
  .strict()
  .refine((a) => a.before === undefined || a.at === undefined, 'give before (the page after an entry) or at (the page from it), not both');

const current = shardOpHandlers().historyActivity!;
const olderActivity: ShardOpHandler = async (data, ctx) => {
  const parsed = olderArgs.safeParse(data.args ?? {});
  if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', parsed.error.issues.map((i) => i.message).join('; '));
  return current(data, ctx);
};

let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;
let history: HistoryClient;

const db = 'acme/old';
const by = { who: 'operator:test', via: 'operator' as const };
const LATER = 3;
let keep: ActivityEntry;

const write = (sql: string) =>
  client.call({ workspace: 'acme', agent: 'old', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never);

withHistorySandbox({ ops: { historyActivity: olderActivity }, admins: ['acme/alice'] }, (box) => ({ sb, client, ops, history } = box));

beforeAll(async () => {
  expect(await write('CREATE TABLE t (v INTEGER)')).toMatchObject({ ok: true });
  expect(await write('INSERT INTO t VALUES (0)')).toMatchObject({ ok: true });
  for (let i = 1; i <= LATER; i++) expect(await write(`INSERT INTO t VALUES (${i})`)).toMatchObject({ ok: true });
  keep = (await history.activity(db, {}, 'operator')).entries[LATER]!;
  expect(keep.statement).toBe('INSERT INTO t VALUES (0)');
}, 120_000);

describe('a restore read by a worker of the build before the activity page took "after"', () => {
  it('the worker refuses the key, as that build did', async () => {
    const out = await ops.run(shardOf(db, sb.config.shardCount), 'historyActivity', { after: keep.id }, { db, timeoutMs: 60_000 });
    expect(out).toEqual({ ok: false, error: { code: 'INVALID_ARGUMENTS', detail: 'Unrecognized key: "after"' } });
  });

  it('its dry run lists and counts what it would take away, naming the entry it keeps', async () => {
    const dry = await history.restore(db, { through: keep.id, dryRun: true, by }, 'operator');
    expect(dry.after).toMatchObject({ count: LATER, more: false, kept: { id: keep.id } });
    expect(dry.after!.note).toBeUndefined();
    expect(dry.after!.entries.map((e) => e.statement)).toEqual(['INSERT INTO t VALUES (3)', 'INSERT INTO t VALUES (2)', 'INSERT INTO t VALUES (1)']);
    const text = dryRunText(dry);
    expect(text).not.toContain('not listed');
    expect(text).toContain(`it would take away ${LATER} entries, newest first:`);
  });

  it('done, it says how many it took away and which command lists them', async () => {
    const done = await history.restore(db, { through: keep.id, by }, 'operator');
    const own = (await history.activity(db, { limit: 1 }, 'operator')).entries[0]!;
    expect(own.kind).toBe('restore');
    expect(done).toMatchObject({ tookAway: { entries: LATER, listedBefore: own.id } });
    expect(restoredText(done, { through: keep.id })).toContain(`it took away ${LATER} activity entries: agentdb activity ${db} --before ${own.id} lists them`);
  });

  it('past a page, its dry run says at least that many and gives the command for the rest', async () => {
    for (let i = 0; i < RESTORE_PREVIEW_ENTRIES + 1; i++) expect(await write(`INSERT INTO t VALUES (${100 + i})`)).toMatchObject({ ok: true });
    const dry = await history.restore(db, { through: keep.id, dryRun: true, by }, 'operator');
    expect(dry.after).toMatchObject({ more: true });
    expect(dry.after!.entries).toHaveLength(RESTORE_PREVIEW_ENTRIES);
    const text = dryRunText(dry);
    expect(text).not.toContain('not listed');
    expect(text).toContain(`it would take away at least ${RESTORE_PREVIEW_ENTRIES} entries, the newest ${RESTORE_PREVIEW_ENTRIES} first:`);
    expect(text).toContain(`(and more: agentdb activity ${db} --before ${dry.after!.entries.at(-1)!.id} lists them, newest first)`);
  }, 120_000);
});
