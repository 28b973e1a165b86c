import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { dryRunText, restoredText } from '../../src/cli/restore-text.ts';
import { RESTORE_PREVIEW_ENTRIES } from '../../src/history/restore-preview.ts';
import type { ActivityEntry, HistoryClient } from '../../src/shards/history-client.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';
import { whoOf } from '../helpers/who.ts';

// Session 36, N13 (N12's leftover): a restore taking away more than a page of the activity list
// (50 entries) said "at least 50" in its dry run and, done, printed only a position: neither the
// entry it kept nor how many it took away, nor where to read them. Through the real queue,
// workers, executor and history.

let client: AgentDbClient;
let history: HistoryClient;

const db = 'acme/bulk';
const settings = { database: 'agent' as const };
const bulk = { workspace: 'acme', agent: 'bulk', settings };
const by = { who: 'operator:test', via: 'operator' as const };
const MORE = 7;
const LATER = RESTORE_PREVIEW_ENTRIES + MORE;
let approved: ActivityEntry;
let upkeep: string;

withHistorySandbox({ admins: ['acme/alice'] }, (box) => ({ client, history } = box));

beforeAll(async () => {
  const write = (sql: string, extra: object = {}, wait = true) =>
    client.call({ ...bulk, ...extra, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never, { wait });
  expect(await write('CREATE TABLE t (v INTEGER)')).toMatchObject({ ok: true });
  // An approved write: its decision's audit row is agentdb's upkeep commit just after it, the
  // state a restore --at its time keeps, which only `history --all-commits` lists.
  const parked = (await write('INSERT INTO t VALUES (0)', { settings: { ...settings, approval: 'write' } }, false)) as never as AwaitingAnswer;
  expect(parked.status).toBe('awaiting_approval');
  expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
  expect(await client.result(parked.callId, { ...whoOf(parked), wait: true })).toMatchObject({ ok: true });
  for (let i = 1; i <= LATER; i++) expect(await write(`INSERT INTO t VALUES (${i})`)).toMatchObject({ ok: true });
  const listed = (await history.activity(db, { limit: 200 }, 'operator')).entries;
  approved = listed.find((e) => e.approvedBy)!;
  // The state just before the first write after it: the decision's audit row, no entry of the list.
  upkeep = listed[listed.indexOf(approved) - 1]!.restoreBefore;
  expect(upkeep).not.toBe(approved.id);
}, 120_000);

describe('a restore taking away more than a page of the activity list', () => {
  it('its dry run counts them all, names the entry it keeps, and gives the command that lists the rest', async () => {
    const dry = await history.restore(db, { through: upkeep, dryRun: true, by }, 'operator');
    expect(dry.after).toMatchObject({ count: LATER, more: true, kept: { id: approved.id } });
    expect(dry.after!.entries).toHaveLength(RESTORE_PREVIEW_ENTRIES);
    const lines = dryRunText(dry).split('\n');
    expect(lines[1]).toBe(`the last activity entry it keeps: ${approved.at} agent:bulk DATA_WRITE_SQL INSERT INTO t VALUES (0), position ${approved.id}`);
    expect(lines).toContain(`it would take away ${LATER} entries, the newest ${RESTORE_PREVIEW_ENTRIES} first:`);
    const last = dry.after!.entries.at(-1)!;
    expect(lines).toContain(`(and ${MORE} more: agentdb activity ${db} --before ${last.id} lists them, newest first, above position ${approved.id})`);
    // That command lists exactly the rest, then the entry kept.
    const rest = (await history.activity(db, { before: last.id, limit: MORE + 1 }, 'operator')).entries;
    expect(rest.at(-1)!.id).toBe(approved.id);
  });

  it('done in place, it says how many it took away and which command lists them, down to the entry it keeps', async () => {
    const done = await history.restore(db, { through: upkeep, by }, 'operator');
    const listed = (await history.activity(db, { limit: 1 }, 'operator')).entries[0]!;
    expect(listed).toMatchObject({ kind: 'restore' });
    expect(done).toMatchObject({ kept: { id: approved.id }, tookAway: { entries: LATER, listedBefore: listed.id } });
    const lines = restoredText(done, {}).split('\n');
    expect(lines[1]).toBe(`the last activity entry it keeps: ${approved.at} agent:bulk DATA_WRITE_SQL INSERT INTO t VALUES (0), position ${approved.id}`);
    expect(lines[2]).toBe(
      `it took away ${LATER} activity entries: agentdb activity ${db} --before ${listed.id} lists them, newest first, above position ${approved.id}`,
    );
    expect(lines[3]).toMatch(/^undo id u\S+: agentdb restore acme\/bulk --undo /);
    const undone = (await history.activity(db, { before: listed.id, limit: LATER + 1 }, 'operator')).entries;
    expect(undone.map((e) => e.statement)).toEqual([
      ...Array.from({ length: LATER }, (_, i) => `INSERT INTO t VALUES (${LATER - i})`),
      'INSERT INTO t VALUES (0)',
    ]);
  });

  it('a fork says how many entries of the database it was made from it leaves out', async () => {
    const fork = await history.restore(db, { through: upkeep, into: 'acme/bulk-fork', by }, 'operator');
    // The source's list now has the restore above them: the fork leaves out that and the 57 calls.
    expect(fork).toMatchObject({ kept: { id: approved.id }, tookAway: { entries: LATER + 1 } });
    expect(restoredText(fork, {}).split('\n')[2]).toBe(
      `it left out the newest ${LATER + 1} activity entries of ${db}: agentdb activity ${db} lists them, newest first, above position ${approved.id}`,
    );
  });
});
