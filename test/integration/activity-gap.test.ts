import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { databasePath, parseDatabaseId, shardOf } from '../../src/contracts/database-id.ts';
import type { ActivityRows } from '../../src/history/activity-rows.ts';
import { activityPage, type ActivityEntry, type ActivityPage } from '../../src/history/activity-view.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { activitySince, readActivity, type ActivityRow } from '../../src/sqlite/sqlite-activity.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import { positionToken } from '../../src/history/position-token.ts';
import { wholeHistoryPage } from '../helpers/activity-oracle.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';

// Review R29 M1: a program outside agentdb wrote to a live database file and checkpointed it, and
// history began a new generation from a snapshot (a gap) that also held the next agent write.
// The list showed neither the outside write nor that acknowledged call. It must show the gap, and
// the calls its snapshot holds, with the state before the gap as their `restoreBefore`; the worker's
// kept list, a fresh one and the whole-history oracle must agree, page by page.

let sb: Sandbox;
let client: AgentDbClient;
let history: HistoryClient;

const shared = { database: 'workspace' as const, sharedData: true };
const agent = { workspace: 'gapws', agent: 'one', settings: shared };
const write = async (sql: string) =>
  expect(await client.call({ ...agent, tool: 'DATA_WRITE_SQL', arguments: { sql, scope: 'workspace' } } as never)).toMatchObject({ ok: true });
const fileOf = (id: string) => {
  const { workspace, agent: name } = parseDatabaseId(id);
  return databasePath(sb.config.dataDir, workspace, name, shardOf(id, sb.config.shardCount));
};

function fileRows(id: string): ActivityRows {
  const read = <T>(f: (db: Database.Database) => T): T => {
    const db = new Database(fileOf(id), { readonly: true, fileMustExist: true });
    try {
      return f(db);
    } finally {
      db.close();
    }
  };
  return {
    all: async () => read((db) => readActivity(db) as Pick<ActivityRow, 'seq' | 'kind' | 'at'>[]),
    some: async (seqs) => read((db) => readActivity(db, seqs) as ActivityRow[]),
    since: async (after) => read((db) => activitySince(db, after)),
  };
}

async function pages(page: (opts: { limit: number; before?: string }) => Promise<ActivityPage>, limit: number): Promise<ActivityPage[]> {
  const out: ActivityPage[] = [];
  let before: string | undefined;
  do {
    const p = await page({ limit, ...(before ? { before } : {}) });
    out.push(p);
    before = p.next;
  } while (before && out.length < 200);
  return out;
}

withHistorySandbox({}, (box) => ({ sb, client, history } = box));

describe('the activity list after an outside write began a gap', () => {
  it('lists the gap and the calls its snapshot holds, the same kept, fresh and read whole', async () => {
    await write('CREATE TABLE t (v TEXT)');
    for (const v of ['a', 'b']) await write(`INSERT INTO t VALUES ('${v}')`);
    const before = (await history.activity('gapws', { limit: 1 }, 'operator')).entries[0]!;
    // A warm kept list first: the gap must reach it, not only a fresh read.
    await history.activity('gapws', { limit: 200 }, 'operator');

    // The operator's sqlite3 shell: a write, then a checkpoint that empties the WAL.
    const outside = new Database(fileOf('gapws'));
    outside.prepare("INSERT INTO t VALUES ('outside')").run();
    outside.pragma('wal_checkpoint(TRUNCATE)');
    outside.close();
    for (const v of ['c', 'd', 'e']) await write(`INSERT INTO t VALUES ('${v}')`);
    await history.activity('gapws', { limit: 1 }, 'operator');
    const gens = listGenerations(localSource(sb.config.dataDir, 'gapws'));
    const gapGen = gens.find((g) => g.snapshot?.reason === 'gap');
    expect(gapGen, `no gap generation: ${gens.map((g) => g.snapshot?.reason).join(',')}`).toBeDefined();

    const entries = (await history.activity('gapws', { limit: 200 }, 'operator')).entries;
    const listed = (v: string) => entries.find((e) => e.statement === `INSERT INTO t VALUES ('${v}')`);
    // Every acknowledged call is listed, the one the snapshot took too.
    for (const v of ['a', 'b', 'c', 'd', 'e']) expect(listed(v), v).toBeDefined();
    const gap = entries.find((e) => e.kind === 'gap')!;
    // Positions as given out: marked with their database.
    const mark = (position: string) => positionToken('gapws', position);
    expect(gap).toMatchObject({ id: mark(gapGen!.name), restoreBefore: before.id, held: 1 });
    // The call the snapshot holds: just above the gap, restorable only to before the whole gap.
    const c = listed('c')!;
    expect(c).toMatchObject({ kind: 'call', heldIn: gapGen!.name, restoreBefore: before.id, by: 'agent:one' });
    expect(entries.indexOf(c)).toBe(entries.indexOf(gap) - 1);
    // The next call is the generation's first commit: before it is the snapshot's state.
    expect(listed('d')).toMatchObject({ restoreBefore: mark(gapGen!.name) });
    expect(listed('d')!.heldIn).toBeUndefined();
    expect(entries.every((e: ActivityEntry) => e.kind !== 'outside')).toBe(true);

    // Page by page (one entry a page pages through the gap's own entries): kept, fresh and oracle agree.
    const now = Date.now();
    for (const limit of [1, 2, 200]) {
      const want = await pages((o) => wholeHistoryPage(sb.config.dataDir, 'gapws', fileRows('gapws'), o, now), limit);
      expect(want.flatMap((p) => p.entries)).toEqual(entries);
      expect(want.filter((p) => p.behind)).toEqual([]);
      expect(await pages((o) => history.activity('gapws', o, 'operator'), limit)).toEqual(want);
      expect(await pages((o) => activityPage(sb.config.dataDir, 'gapws', fileRows('gapws'), o, now), limit)).toEqual(want);
    }
    // A restore back to before the gap, through the held call's restoreBefore, takes the outside row away too.
    await history.restore('gapws', { through: c.restoreBefore, by: { who: 'operator:test', via: 'operator' } }, 'operator');
    const check = new Database(fileOf('gapws'), { readonly: true });
    expect(check.prepare('SELECT group_concat(v) AS v FROM t').get()).toEqual({ v: 'a,b' });
    check.close();
  });
});
