import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { ACTIVITY_RETENTION_MS, MAX_ACTIVITY_SQL_BYTES } from '../../src/sqlite/sqlite-activity.ts';
import fs from 'node:fs';
import { activityPage } from '../../src/history/activity-view.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { commitLine, readIndex } from '../../src/history/segment-index.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { HistoryClient, type ActivityEntry } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { pastMs } from '../helpers/history.ts';
import { whoOf } from '../helpers/who.ts';
import { dryRunText, restoredText } from '../../src/cli/restore-text.ts';

// The activity list (issue 29 part 3) through the real queue, workers, executor and history:
// each commit as the call that made it, a restore, and a write from outside agentdb.

let sb: Sandbox;
let redis: Redis;
let client: AgentDbClient;
let ops: ShardOpClient;
let history: HistoryClient;

const shared = { database: 'workspace' as const, sharedData: true };
const scout = { workspace: 'acme', agent: 'scout', settings: shared };
const careful = { workspace: 'acme', agent: 'careful', settings: { ...shared, approval: 'write' as const } };
const ada = { workspace: 'acme', agent: '@ada', member: { name: 'ada', role: 'admin' as const }, settings: shared };
const write = (who: object, sql: string, rationale?: string) =>
  client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql, scope: 'workspace', ...(rationale ? { rationale } : {}) } } as never);
const count = async () =>
  ((await client.call({ ...scout, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM leads', scope: 'workspace' } } as never)) as any).result
    .rows[0][0];
const everything = async () => (await history.activity('acme', { limit: 200 }, 'operator')).entries;

let beforeMember = 0;
let longSql = '';

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  redis = new Redis(REDIS_URL);
  await new MemberRegistry(redis, keysFor(sb.config.prefix)).add('acme', 'alice', 'admin');
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  history = new HistoryClient(ops, sb.config.shardCount);

  expect(await write(scout, 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)', 'a table for leads')).toMatchObject({ ok: true });
  expect(await write(scout, "INSERT INTO leads(email) VALUES ('a@x'), ('b@x')")).toMatchObject({ ok: true });
  beforeMember = Date.now();
  pastMs(beforeMember);
  expect(await write(ada, "INSERT INTO leads(email) VALUES ('ada@x')")).toMatchObject({ ok: true });
  const parked = (await client.call(
    {
      ...careful,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: "UPDATE leads SET email = 'c@x' WHERE id = 1", scope: 'workspace', rationale: 'fix a typo' },
    } as never,
    { wait: false },
  )) as AwaitingAnswer;
  expect(parked.status).toBe('awaiting_approval');
  expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
  expect(await client.result(parked.callId, { ...whoOf(parked), wait: true })).toMatchObject({ ok: true });

  // A program outside agentdb writes while the worker holds the file open: its commit reaches
  // history with the next capture.
  const file = databasePath(sb.config.dataDir, 'acme', undefined, shardOf('acme', sb.config.shardCount));
  const outside = new Database(file);
  outside.prepare("INSERT INTO leads(email) VALUES ('outside@x')").run();
  outside.close();
  longSql = `INSERT INTO leads(email) VALUES ('${'x'.repeat(MAX_ACTIVITY_SQL_BYTES + 500)}')`;
  expect(await write(scout, longSql)).toMatchObject({ ok: true });
});

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await sb.cleanup();
});

const calls = (entries: ActivityEntry[]) => entries.filter((e) => e.kind === 'call');

describe('agentdb activity: history as what was done', () => {
  it('lists each commit as the call that made it, newest first: who, tool, SQL cut, rationale, approver, rows changed, and the outside write', async () => {
    const entries = await everything();
    expect(entries.map((e) => [e.kind, e.by ?? null])).toEqual([
      ['call', 'agent:scout'],
      ['outside', null],
      ['call', 'agent:careful'],
      ['call', 'member:ada'],
      ['call', 'agent:scout'],
      ['call', 'agent:scout'],
    ]);
    const [long, , approved, member, insert, create] = entries as [ActivityEntry, ActivityEntry, ActivityEntry, ActivityEntry, ActivityEntry, ActivityEntry];
    expect(long.statement!.length).toBe(MAX_ACTIVITY_SQL_BYTES);
    expect(long.statementCut).toBe(Buffer.byteLength(longSql) - MAX_ACTIVITY_SQL_BYTES);
    expect(approved).toMatchObject({
      tool: 'DATA_WRITE_SQL',
      statement: "UPDATE leads SET email = 'c@x' WHERE id = 1",
      rationale: 'fix a typo',
      rowsChanged: 1,
    });
    expect(approved.approvedBy).toContain('alice');
    expect(member).toMatchObject({ statement: "INSERT INTO leads(email) VALUES ('ada@x')", rowsChanged: 1 });
    expect(member.approvedBy).toBeUndefined();
    expect(insert).toMatchObject({ rowsChanged: 2, callId: expect.any(String) });
    expect(create).toMatchObject({ statement: 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)', rationale: 'a table for leads', rowsChanged: 0 });
    // Newest first, each a moment to restore to just before it.
    // Each a history position (the state just before it), not a time: never the entry itself.
    // Marked with their database (`~` and 8 hex digits), so that no other database takes them.
    for (const e of entries) expect(e.restoreBefore).toMatch(/^g\d{10}(\.\d{8}\.\d+)?~[0-9a-f]{8}$/);
    for (const e of entries) expect(e.restoreBefore).not.toBe(e.id);
    for (let i = 1; i < entries.length; i++) expect(Date.parse(entries[i - 1]!.at)).toBeGreaterThanOrEqual(Date.parse(entries[i]!.at));
  });

  it("lists in the history the users' last commits, not agentdb's upkeep (a decision's audit row); all of them when asked", async () => {
    const entries = await everything();
    let read = -1;
    const view = await history.history('acme', 'operator', { onRead: (n) => (read = n) });
    // Newest first, as the activity list (review R1 low: oldest first, it read backwards beside
    // it), each with the position a restore --through it takes.
    expect(view.recentCommits.map((c) => c.position)).toEqual(entries.map((e) => e.id));
    expect(view.recentCommits.map((c) => c.at)).toEqual(entries.map((e) => e.at));
    expect(view.recentCommits[0]).toMatchObject({ at: view.latest, generation: 'g0000000001' });
    expect(read).toBeGreaterThanOrEqual(0);
    // The approved call's audit row was committed on its own: agentdb's bookkeeping, listed only with every commit.
    const all = await history.history('acme', 'operator', { commits: 'all' });
    expect(all.recentCommits.length).toBeGreaterThan(view.recentCommits.length);
    expect(all.recentCommits[0]!.at).toBe(all.latest);
    const times = all.recentCommits.map((c) => c.at);
    expect(times).toEqual([...times].sort().reverse());
    expect(all.recentCommits.map((c) => c.position)).toEqual(expect.arrayContaining(view.recentCommits.map((c) => c.position)));
    expect((await history.history('acme', 'operator', { commits: 'none' })).recentCommits).toEqual([]);
  });

  it('a dry run to an upkeep commit, which the history leaves out, names the last activity entry it keeps too', async () => {
    // Review N5 (session 29): a dry run just after an approved write kept "the last commit" at a
    // time and position `agentdb history` listed nowhere: the decision's audit row, committed after it.
    const users = new Set((await history.history('acme', 'operator')).recentCommits.map((c) => c.position));
    const upkeep = (await history.history('acme', 'operator', { commits: 'all' })).recentCommits.find((c) => !users.has(c.position))!;
    expect(upkeep).toBeDefined();
    const dry = await history.restore('acme', { through: upkeep.position, dryRun: true, by: { who: 'operator:test', via: 'operator' } }, 'operator');
    expect(dry.keeps).toBe(upkeep.position);
    // The entry just before the upkeep commit: the approved UPDATE whose decision it records.
    const approved = (await everything()).find((e) => e.by === 'agent:careful')!;
    expect(dry.after?.kept).toMatchObject({ id: approved.id, at: approved.at, by: 'agent:careful' });
    const text = dryRunText(dry);
    expect(text.split('\n').slice(0, 2)).toEqual([
      `dry run, nothing changed: acme would be restored as of ${dry.restoredTo} (the last commit kept: agentdb's own upkeep, listed by agentdb history --all-commits), position ${upkeep.position}`,
      `the last activity entry it keeps: ${approved.at} agent:careful DATA_WRITE_SQL UPDATE leads SET email = 'c@x' WHERE id = 1, position ${approved.id}`,
    ]);
    // The restore itself says as much (session 35, N11: a real --at printed "(the last commit
    // kept)" alone): forked as of that commit's time, it names the position and the entry kept.
    const at = (await history.history('acme', 'operator', { commits: 'all' })).recentCommits.find((c) => c.position === upkeep.position)!.at;
    const done = await history.restore('acme', { at, into: 'acme/kept', by: { who: 'operator:test', via: 'operator' } }, 'operator');
    expect(done).toMatchObject({ keeps: upkeep.position, kept: { id: approved.id } });
    expect(restoredText(done, {}).split('\n').slice(0, 2)).toEqual([
      `made acme/kept from acme as of ${dry.restoredTo} (the last commit kept: agentdb's own upkeep, listed by agentdb history --all-commits), position ${upkeep.position}`,
      `the last activity entry it keeps: ${approved.at} agent:careful DATA_WRITE_SQL UPDATE leads SET email = 'c@x' WHERE id = 1, position ${approved.id}`,
    ]);
    // A dry run to a listed commit reads as before.
    const plain = await history.restore('acme', { through: approved.id, dryRun: true, by: { who: 'operator:test', via: 'operator' } }, 'operator');
    expect(dryRunText(plain)).toMatch(/^dry run, nothing changed: acme would be restored as of \S+ \(the last commit kept\), position \S+\nbuilt from/);
  });

  it("refuses a position copied from another database's list (HISTORY_POSITION_FOREIGN), and still reads a plain one as its own", async () => {
    // Another database, whose history numbers its commits as acme's does: the same plain positions exist in both.
    const own = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
    for (const sql of ['CREATE TABLE t (v)', 'INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (2)'])
      expect(await client.call({ ...own, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never)).toMatchObject({ ok: true });
    const theirs = (await history.activity('acme/scout', {}, 'operator')).entries;
    const ours = await everything();
    const copied = theirs[0]!;
    const plain = (token: string) => token.split('~')[0]!;
    // The same number names a state of acme too: only the mark tells them apart.
    expect(ours.map((e) => plain(e.id))).toContain(plain(copied.id));
    const by = { who: 'operator:test', via: 'operator' as const };
    for (const position of [copied.id, copied.restoreBefore]) {
      await expect(history.activity('acme', { before: position }, 'operator')).rejects.toMatchObject({ code: 'HISTORY_POSITION_FOREIGN' });
      await expect(history.restore('acme', { through: position, dryRun: true, by }, 'operator')).rejects.toMatchObject({ code: 'HISTORY_POSITION_FOREIGN' });
      await expect(history.restore('acme', { through: position, into: 'acme/copy', dryRun: true, by }, 'operator')).rejects.toMatchObject({
        code: 'HISTORY_POSITION_FOREIGN',
      });
    }
    // Its own positions, marked or plain (the form given out before marks), are taken.
    const entry = ours.find((e) => plain(e.id) === plain(copied.id))!;
    for (const position of [entry.id, plain(entry.id)]) {
      expect((await history.activity('acme', { before: position, limit: 1 }, 'operator')).entries.map((e) => e.id)).toEqual(
        [ours[ours.indexOf(entry) + 1]?.id].filter(Boolean),
      );
      expect(await history.restore('acme', { through: position, dryRun: true, by }, 'operator')).toMatchObject({ dryRun: true });
    }
  });

  it('pages with a cursor, each entry once', async () => {
    const all = await everything();
    const seen: string[] = [];
    let before: string | undefined;
    for (let page = 0; page < 10; page++) {
      const p = await history.activity('acme', { limit: 2, ...(before ? { before } : {}) }, 'operator');
      seen.push(...p.entries.map((e) => e.id));
      if (!p.next) break;
      expect(p.entries).toHaveLength(2);
      before = p.next;
    }
    expect(seen).toEqual(all.map((e) => e.id));
    await expect(history.activity('acme', { before: 'g0000000009.s0000000001.0' }, 'operator')).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
  });

  it('shows a restore as such, and keeps listing the calls it undid', async () => {
    const member = (await everything()).find((e) => e.by === 'member:ada')!;
    const restored = await history.restore('acme', { through: member.restoreBefore, by: { who: 'operator:test', via: 'operator' } }, 'operator');
    expect(restored.undoId).toBeDefined();
    expect(await count()).toBe(2);
    const entries = await everything();
    expect(entries[0]).toMatchObject({ kind: 'restore', tool: 'RESTORE', by: 'operator:test', statement: expect.stringContaining('restore to') });
    expect(calls(entries).map((e) => e.by)).toEqual(['agent:scout', 'agent:careful', 'member:ada', 'agent:scout', 'agent:scout']);
    expect(entries.filter((e) => e.kind === 'outside')).toHaveLength(1);

    // A call after the restore is listed above it.
    expect(await write(scout, "INSERT INTO leads(email) VALUES ('after@x')")).toMatchObject({ ok: true });
    const after = await everything();
    expect(after[0]).toMatchObject({ kind: 'call', by: 'agent:scout', statement: "INSERT INTO leads(email) VALUES ('after@x')" });
    expect(after[1]).toMatchObject({ kind: 'restore' });
  });

  it('is for a workspace admin or an operator, and says NOT_FOUND for a database never written', async () => {
    await expect(history.activity('acme', {}, { member: { workspace: 'acme', name: 'bob', role: 'member' } })).rejects.toMatchObject({ code: 'NOT_PERMITTED' });
    await expect(history.activity('acme', {}, { member: { workspace: 'other', name: 'oz', role: 'admin' } })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await history.activity('acme', { limit: 1 }, { member: { workspace: 'acme', name: 'alice', role: 'admin' } })).entries).toHaveLength(1);
    await expect(history.activity('acme/nobody', {}, 'operator')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('restores that copy a file in, and forks', () => {
  it('shows a restore that rebuilt the database (a new generation) once, above the calls it undid, and a fork as its creation', async () => {
    const bulk = { workspace: 'acme', agent: 'bulk', settings: { database: 'agent' as const } };
    const w = (sql: string) => client.call({ ...bulk, tool: 'DATA_WRITE_SQL', arguments: { sql } } as never);
    expect(await w('CREATE TABLE b (x BLOB)')).toMatchObject({ ok: true });
    expect(await w('INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 300) SELECT zeroblob(3000) FROM c')).toMatchObject({
      ok: true,
    });
    const moment = new Date(Date.now()).toISOString();
    pastMs(Date.parse(moment));
    // Every page changes: a restore to before it rebuilds the file rather than write pages back.
    expect(await w('UPDATE b SET x = randomblob(3000)')).toMatchObject({ ok: true });
    await history.restore('acme/bulk', { at: moment, by: { who: 'operator:test', via: 'operator' } }, 'operator');
    expect((await history.history('acme/bulk', 'operator')).generations.map((g) => g.reason)).toEqual(['first', 'restore']);
    const entries = (await history.activity('acme/bulk', {}, 'operator')).entries;
    expect(entries.map((e) => [e.kind, e.statement?.split(' ').slice(0, 2).join(' ')])).toEqual([
      ['restore', 'restore to'],
      ['call', 'UPDATE b'],
      ['call', 'INSERT INTO'],
      ['call', 'CREATE TABLE'],
    ]);
    expect(entries[1]).toMatchObject({ by: 'agent:bulk', rowsChanged: 300 });

    // A fork's history begins with its creation; the calls before it are its source's.
    await history.restore('acme/bulk', { at: moment, into: 'acme/copy', by: { who: 'operator:test', via: 'operator' } }, 'operator');
    const fork = (await history.activity('acme/copy', {}, 'operator')).entries;
    expect(fork).toMatchObject([{ kind: 'restore', by: 'operator:test', statement: expect.stringContaining('created from acme/bulk') }]);
  });
});

describe('what is not an entry, and drops', () => {
  it('lists a drop by its table; a rejected call and its audit row add nothing', async () => {
    const before = (await everything()).length;
    const parked = (await client.call(
      { ...careful, tool: 'DATA_WRITE_SQL', arguments: { sql: 'DELETE FROM leads', scope: 'workspace', rationale: 'clean up' } } as never,
      { wait: false },
    )) as AwaitingAnswer;
    expect(await client.decide(parked.approval.id, { decision: 'reject', by: 'alice', operator: true })).toMatchObject({ ok: true });
    expect(await client.result(parked.callId, { ...whoOf(parked), wait: true })).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
    expect(await write(scout, 'CREATE TABLE scratch (x)')).toMatchObject({ ok: true });
    const drop = await client.call({ ...ada, tool: 'DATA_DROP_TABLE', arguments: { table: 'scratch', scope: 'workspace' } } as never);
    expect(drop).toMatchObject({ ok: true });
    const entries = await everything();
    expect(entries).toHaveLength(before + 2);
    expect(entries[0]).toMatchObject({ kind: 'call', by: 'member:ada', tool: 'DATA_DROP_TABLE', statement: 'scratch' });
    expect(entries[1]).toMatchObject({ kind: 'call', by: 'agent:scout', statement: 'CREATE TABLE scratch (x)' });
  });
});

describe('commits without a row', () => {
  it('are outside writes while rows are kept, and unknown past their retention', async () => {
    const none = { all: async () => [], some: async () => [] };
    const fresh = await activityPage(sb.config.dataDir, 'acme', none, { limit: 5 });
    expect(new Set(fresh.entries.map((e) => e.kind))).toEqual(new Set(['outside']));
    const later = await activityPage(sb.config.dataDir, 'acme', none, { limit: 5 }, Date.now() + ACTIVITY_RETENTION_MS + 1000);
    expect(new Set(later.entries.map((e) => e.kind))).toEqual(new Set(['unknown']));
  });
});

describe('commits of the same millisecond', () => {
  // History keeps time by the millisecond, and a busy database's commits share them (review 19,
  // H29 finding 3). Capture stamps them as it finds them: here the index is made to say what a
  // burst makes it say, two agents' commits (and agentdb's upkeep between) at one time.
  it("restores to just before one and keeps the other agent's commit before it; forks as of one and keeps it", async () => {
    const one = { workspace: 'pairs', agent: 'one', settings: shared };
    const two = { workspace: 'pairs', agent: 'two', settings: shared };
    const by = { who: 'operator:test', via: 'operator' as const };
    const rows = async () =>
      (
        (await client.call({ ...one, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t ORDER BY v', scope: 'workspace' } } as never)) as any
      ).result.rows.map((r: unknown[]) => r[0]);
    expect(await write(one, 'CREATE TABLE t (v TEXT)')).toMatchObject({ ok: true });
    expect(await write(one, "INSERT INTO t VALUES ('a')")).toMatchObject({ ok: true });
    expect(await write(two, "INSERT INTO t VALUES ('b')")).toMatchObject({ ok: true });
    expect(await write(one, "INSERT INTO t VALUES ('c')")).toMatchObject({ ok: true });
    const listed = (await history.activity('pairs', {}, 'operator')).entries;
    const [c, b, a] = listed;
    expect([c, b, a].map((e) => e?.by)).toEqual(['agent:one', 'agent:two', 'agent:one']);
    const [gen, seg, nA] = a!.id.split('~')[0]!.split('.');
    const [genB, segB, nB] = b!.id.split('~')[0]!.split('.');
    expect([genB, segB]).toEqual([gen, seg]);
    const source = localSource(sb.config.dataDir, 'pairs');
    const segment = listSegments(listGenerations(source).find((g) => g.name === gen)!).find((s) => s.name === seg)!;
    const commits = readIndex(segment.indexPath).commits;
    const same = commits[Number(nB)]!.at;
    for (let n = Number(nA); n <= Number(nB); n++) commits[n] = { ...commits[n]!, at: same };
    fs.writeFileSync(segment.indexPath, commits.map(commitLine).join(''));

    const entries = (await history.activity('pairs', {}, 'operator')).entries;
    const [, b2, a2] = entries;
    expect([b2?.id, a2?.id]).toEqual([b!.id, a!.id]);
    expect(a2!.at).toBe(b2!.at);

    // Fork as of b: a and b, not c.
    await history.restore('pairs', { through: b2!.id, into: 'pairs/fork', by }, 'operator');
    const fork = new Database(databasePath(sb.config.dataDir, 'pairs', 'fork', shardOf('pairs/fork', sb.config.shardCount)), { readonly: true });
    expect(fork.prepare('SELECT v FROM t ORDER BY v').pluck().all()).toEqual(['a', 'b']);
    fork.close();

    // Just before b: b and c undone, a (the same millisecond, just before it) kept.
    const undone = await history.restore('pairs', { through: b2!.restoreBefore, by }, 'operator');
    expect(await rows()).toEqual(['a']);
    // A restore in place names the entry it kept, read from the list after it ran.
    expect(undone).toMatchObject({ keeps: b2!.restoreBefore, kept: { id: a2!.id } });
  });
});
