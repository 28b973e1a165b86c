import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { HISTORY_HINTS } from '../../src/history/history-hints.ts';
import { buildApp } from '../../src/http/app.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { RestoreOnce } from '../../src/shards/restore-once.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import fs from 'node:fs';
import path from 'node:path';
import { buildActivity } from '../helpers/activity-build.ts';
import { pastMs } from '../helpers/history.ts';
import { keyedApp } from '../helpers/keyed-app.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
let redis: Redis;
let client: AgentDbClient;
let ops: ShardOpClient;
let approvals: ApprovalService;
let app: FastifyInstance;
const key: Record<string, string> = {};
let moment = 0;

const settings = { database: 'agent' as const };
const write = (sql: string) => client.call({ workspace: 'acme', agent: 'scout', settings, tool: 'DATA_WRITE_SQL', arguments: { sql } });
const rows = async () =>
  ((await client.call({ workspace: 'acme', agent: 'scout', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM leads' } })) as any)
    .result.rows[0][0];
const as = (who: string) => ({ authorization: `Bearer ${key[who]}` });

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  redis = new Redis(REDIS_URL);
  const members = new MemberRegistry(redis, keysFor(sb.config.prefix));
  approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  const agents = new AgentRegistry(redis, keysFor(sb.config.prefix));
  app = buildApp({
    redis,
    shardCount: sb.config.shardCount,
    members,
    approvals,
    history: new HistoryClient(ops, sb.config.shardCount, agents),
    restoreOnce: new RestoreOnce(redis, keysFor(sb.config.prefix)),
  });
  await new WorkspaceRegistry(redis, keysFor(sb.config.prefix)).put('acme', 'pro');
  await agents.put('acme', 'fresh', { displayName: 'Fresh', settings: { database: 'agent' } } as never);
  for (const [ws, name, role] of [
    ['acme', 'ada', 'admin'],
    ['acme', 'bob', 'member'],
    ['other', 'oz', 'admin'],
  ] as const) {
    key[name] = (await members.add(ws, name, role)).key;
  }
  expect(await write('CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)')).toMatchObject({ ok: true });
  for (let i = 0; i < 5; i++) expect(await write(`INSERT INTO leads(email) VALUES ('a${i}@x')`)).toMatchObject({ ok: true });
  moment = Date.now();
  pastMs(moment);
  expect(await write('DELETE FROM leads')).toMatchObject({ ok: true });
});
afterAll(async () => {
  await app.close();
  await approvals.close();
  await ops.close();
  redis.disconnect();
  await sb.cleanup();
});

describe('GET /v1/databases/:db/history', () => {
  it('shows an admin the restorable range and the generations', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history', headers: as('ada') });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ database: 'acme/scout', earliest: expect.any(String), latest: expect.any(String), undoPoints: [] });
    expect(body.generations[0]).toMatchObject({ id: 'g0000000001', startedAt: expect.any(String), endedAt: null, snapshotAt: expect.any(String) });
    expect(body.generations[0].commits).toBeGreaterThanOrEqual(7);
  });

  it("refuses a member who is not an admin (403), and another workspace's key as if there were no database (404)", async () => {
    const member = await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history', headers: as('bob') });
    expect(member.statusCode).toBe(403);
    // The hint is the history rule's (who may read history and restore), not the tool calls' one
    // about agents' tables and drops (review R1 low).
    expect(member.json()).toMatchObject({ error: { code: 'NOT_PERMITTED', hint: HISTORY_HINTS.NOT_PERMITTED } });
    expect(member.json().error.hint).toMatch(/history.*admins of its workspace/);
    expect(member.json().error.hint).not.toContain('tables');
    const stranger = await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history', headers: as('oz') });
    const nothing = await app.inject({ method: 'GET', url: '/v1/databases/other%2Fnobody/history', headers: as('oz') });
    expect(stranger.statusCode).toBe(404);
    expect(stranger.json().error.code).toBe('NOT_FOUND');
    expect(nothing.statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history' })).statusCode).toBe(401);
  });
});

describe('GET /v1/databases/:db/activity', () => {
  const get = (query = '', who = 'ada', db = 'acme%2Fscout') => app.inject({ method: 'GET', url: `/v1/databases/${db}/activity${query}`, headers: as(who) });

  it("lists an admin the database's commits as the calls that made them, newest first, and pages with a cursor", async () => {
    const res = await get();
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.database).toBe('acme/scout');
    const calls = body.entries.filter((e: { kind: string }) => e.kind === 'call');
    expect(calls.slice(0, 2)).toMatchObject([
      { by: 'agent:scout', tool: 'DATA_WRITE_SQL', statement: 'DELETE FROM leads', rowsChanged: 5, restoreBefore: expect.any(String) },
      { by: 'agent:scout', statement: "INSERT INTO leads(email) VALUES ('a4@x')", rowsChanged: 1 },
    ]);
    const first = (await get('?limit=2')).json();
    expect(first.entries).toHaveLength(2);
    const second = (await get(`?limit=2&before=${encodeURIComponent(first.next)}`)).json();
    expect(second.entries[0].id).toBe(body.entries[2].id);
  });

  it("refuses a member who is not an admin (403), another workspace's key as if there were no database (404), and bad paging (400)", async () => {
    expect((await get('', 'bob')).json()).toMatchObject({ error: { code: 'NOT_PERMITTED', hint: HISTORY_HINTS.NOT_PERMITTED } });
    const stranger = await get('', 'oz');
    expect(stranger.statusCode).toBe(404);
    expect(stranger.json().error.code).toBe('NOT_FOUND');
    // A stranger hears NOT_FOUND whatever it sent: the query is judged after the key may read the database.
    expect((await get('?limit=0', 'oz')).statusCode).toBe(404);
    for (const q of ['?limit=0', '?limit=201', '?limit=x', '?before=g0000000099.00000001.0', '?color=red']) {
      const bad = await get(q);
      expect(bad.statusCode, q).toBe(400);
      expect(bad.json().error.code, q).toBe('INVALID_ARGUMENTS');
    }
    expect((await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/activity' })).statusCode).toBe(401);
  });
});

describe('POST /v1/databases/:db/restore', () => {
  it('a dry run says which snapshot and how many frames, changing nothing', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/databases/acme%2Fscout/restore',
      headers: as('ada'),
      payload: { at: new Date(moment).toISOString(), dryRun: true },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      database: 'acme/scout',
      dryRun: true,
      snapshot: { id: 'g0000000001', at: expect.any(String) },
      frames: expect.any(Number),
      commits: expect.any(Number),
    });
    expect(await rows()).toBe(0);
  });

  it('restores in place with an undo id, undoes it, and forks into a new database', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/databases/acme%2Fscout/restore', headers: as('ada'), payload: { at: moment / 1000 } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ database: 'acme/scout', dryRun: false, undoId: expect.stringMatching(/^u/) });
    expect(await rows()).toBe(5);
    const undo = await app.inject({ method: 'POST', url: '/v1/databases/acme%2Fscout/restore', headers: as('ada'), payload: { undo: body.undoId } });
    expect(undo.statusCode).toBe(200);
    expect(await rows()).toBe(0);
    const fork = await app.inject({
      method: 'POST',
      url: '/v1/databases/acme%2Fscout/restore',
      headers: as('ada'),
      payload: { at: new Date(moment).toISOString(), into: 'acme/scout-before' },
    });
    expect(fork.statusCode).toBe(200);
    expect(fork.json()).toMatchObject({ into: 'acme/scout-before' });
    const forked = await client.call({
      workspace: 'acme',
      agent: 'scout-before',
      settings,
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT count(*) FROM leads' },
    });
    expect((forked as any).result.rows[0][0]).toBe(5);
    const history = (await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history', headers: as('ada') })).json();
    expect(history.undoPoints.map((u: { id: string }) => u.id)).toContain(body.undoId);
  });

  it('restores once for a restore sent again with its Idempotency-Key (a client that lost the answer), and anew with another key', async () => {
    const undoPoints = async () =>
      ((await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history', headers: as('ada') })).json().undoPoints as { id: string }[]).map(
        (u) => u.id,
      );
    const before = await undoPoints();
    const send = (key: string) =>
      app.inject({
        method: 'POST',
        url: '/v1/databases/acme%2Fscout/restore',
        headers: { ...as('ada'), 'idempotency-key': key },
        payload: { at: moment / 1000 },
      });
    const first = await send('retry-1');
    expect(first.statusCode).toBe(200);
    const undoId = first.json().undoId;
    expect(await rows()).toBe(5);
    // The agent deletes again; the client, not knowing its restore ran, sends it again.
    expect(await write('DELETE FROM leads')).toMatchObject({ ok: true });
    const again = await send('retry-1');
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());
    expect(await rows()).toBe(0);
    expect(await undoPoints()).toEqual([...before, undoId]);
    // Another key is another restore.
    const other = await send('retry-2');
    expect(other.statusCode).toBe(200);
    expect(other.json().undoId).not.toBe(undoId);
    expect(await rows()).toBe(5);
    expect(await write('DELETE FROM leads')).toMatchObject({ ok: true });
  });

  it('answers bad input with its registry code, changing nothing', async () => {
    const post = (payload: object, who = 'ada', db = 'acme%2Fscout') =>
      app.inject({ method: 'POST', url: `/v1/databases/${db}/restore`, headers: as(who), payload });
    expect((await post({ at: new Date(Date.now() + 3600_000).toISOString() })).json().error.code).toBe('HISTORY_OUT_OF_RANGE');
    expect((await post({ at: 'yesterday-ish' })).json().error.code).toBe('INVALID_ARGUMENTS');
    // Milliseconds where seconds go: said so, with the seconds meant.
    expect((await post({ at: moment })).json().error).toMatchObject({ code: 'INVALID_ARGUMENTS', message: expect.stringContaining(`looks like milliseconds`) });
    expect((await post({ at: String(moment) })).json().error).toMatchObject({
      code: 'INVALID_ARGUMENTS',
      message: expect.stringContaining(`unix seconds (${Math.floor(moment / 1000)})`),
    });
    // A bare name is the workspace's shared database: the message says how to name an agent's.
    const bare = await ops.run(shardOf('scout', sb.config.shardCount), 'historyList', {}, { db: 'scout', timeoutMs: 30_000 });
    expect(bare).toMatchObject({
      ok: false,
      error: { code: 'NOT_FOUND', detail: expect.stringContaining("scout alone names workspace scout's shared database") },
    });
    // Times past any date: a clear INVALID_ARGUMENTS naming the time, not SQL_ERROR "Invalid time value".
    const huge = (await post({ at: '99999999999999999999999' })).json();
    expect(huge.error).toMatchObject({ code: 'INVALID_ARGUMENTS', message: expect.stringContaining('99999999999999999999999') });
    expect((await post({ at: 1e308 })).json().error).toMatchObject({ code: 'INVALID_ARGUMENTS', message: expect.stringContaining('1e+308') });
    // A registered agent that never wrote: its database must not be created from scout's.
    expect((await post({ at: moment / 1000, into: 'acme/fresh' })).json().error).toMatchObject({
      code: 'DATABASE_EXISTS',
      message: expect.stringContaining('registered agent fresh'),
    });
    // The workspace's shared database, which every agent of it reads: scout's private tables
    // forked there would be every agent's. Refused through the route, and by the shard ops
    // themselves (which anyone holding Redis can queue).
    expect((await post({ at: moment / 1000, into: 'acme' })).json().error).toMatchObject({
      code: 'DATABASE_EXISTS',
      message: expect.stringContaining('shared database'),
    });
    const direct = await ops.run(
      shardOf('acme', sb.config.shardCount),
      'historyRestore',
      { at: moment, into: 'acme', by: { who: 'x', via: 'operator' } },
      { db: 'acme/scout', timeoutMs: 30_000 },
    );
    expect(direct).toMatchObject({ ok: false, error: { code: 'DATABASE_EXISTS' } });
    const fromBlob = await ops.run(
      shardOf('acme', sb.config.shardCount),
      'restoreFromBlob',
      { source: 'acme/scout', by: { who: 'x', via: 'operator' } },
      { db: 'acme', timeoutMs: 30_000 },
    );
    expect(fromBlob).toMatchObject({ ok: false, error: { code: 'DATABASE_EXISTS' } });
    const shared = await client.call({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'workspace' },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT count(*) FROM leads', scope: 'workspace' },
    });
    expect(shared).toMatchObject({ ok: false });
    expect((await post({ undo: 'u0nope' })).json().error.code).toBe('UNDO_NOT_FOUND');
    expect((await post({ at: moment / 1000, into: 'acme/scout' })).json().error.code).toBe('DATABASE_EXISTS');
    expect((await post({ at: moment / 1000, into: 'acme/scout-before' })).json().error.code).toBe('DATABASE_EXISTS');
    // Its hint is about database ids, not an agent's tables (the registry's own names DATA_DESCRIBE_SCHEMA).
    expect((await post({ at: moment / 1000 }, 'ada', 'acme%2Fnobody')).json().error).toMatchObject({
      code: 'NOT_FOUND',
      hint: expect.stringContaining('<workspace>/<agent>'),
    });
    // curl -d without a content type: the message names the header to send.
    const form = await app.inject({
      method: 'POST',
      url: '/v1/databases/acme%2Fscout/restore',
      headers: { ...as('ada'), 'content-type': 'application/x-www-form-urlencoded' },
      payload: JSON.stringify({ at: moment / 1000 }),
    });
    expect(form.statusCode).toBe(415);
    expect(form.json().error).toMatchObject({ code: 'INVALID_ARGUMENTS', message: expect.stringContaining('content-type: application/json') });
    // The id's slash left unencoded: no such route, and the message shows the encoded path.
    const unencoded = await post({ at: moment / 1000 }, 'ada', 'acme/scout');
    expect(unencoded.statusCode).toBe(404);
    expect(unencoded.json().error).toMatchObject({ code: 'NOT_FOUND', message: expect.stringContaining('/v1/databases/acme%2Fscout/restore') });
    expect((await post({ at: moment / 1000, bogus: 1 })).statusCode).toBe(400);
    expect((await post({ at: moment / 1000 }, 'bob')).statusCode).toBe(403);
    expect(await rows()).toBe(0);
  });
});

describe("the history routes' input", () => {
  const restore = (who: string | undefined, db: string, payload?: unknown) =>
    app.inject({
      method: 'POST',
      url: `/v1/databases/${db}/restore`,
      headers: who ? as(who) : {},
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

  it('judges a body only after the key may restore the database: a stranger hears NOT_FOUND, a member NOT_PERMITTED, whatever they sent', async () => {
    expect((await restore('oz', 'acme%2Fscout', { bogus: 1 })).json().error.code).toBe('NOT_FOUND');
    expect((await restore('bob', 'acme%2Fscout', { bogus: 1 })).json().error.code).toBe('NOT_PERMITTED');
    expect((await restore(undefined, 'acme%2Fscout', { bogus: 1 })).statusCode).toBe(401);
    const bad = await restore('ada', 'acme%2Fscout', { at: [], bogus: 1 });
    expect(bad.statusCode).toBe(400);
    // Every issue named (up to five), and the history commands' hint, not the tool calls'.
    expect(bad.json()).toEqual({
      error: { code: 'INVALID_ARGUMENTS', message: expect.stringMatching(/Unrecognized key.*bogus/), hint: HISTORY_HINTS.INVALID_ARGUMENTS },
    });
    expect(bad.json().error.message).toContain('at: ');
  });

  it('takes no body as an empty one, which the core then asks to name a time', async () => {
    const none = await restore('ada', 'acme%2Fscout');
    expect(none.statusCode).toBe(400);
    expect(none.json().error).toMatchObject({ code: 'INVALID_ARGUMENTS', message: expect.stringContaining('Give exactly one of a time') });
  });

  it('refuses an empty database id before anything reads it, with the history hint', async () => {
    const empty = await app.inject({ method: 'GET', url: '/v1/databases//history', headers: as('ada') });
    expect(empty.statusCode).toBe(400);
    expect(empty.json()).toEqual({
      error: { code: 'INVALID_ARGUMENTS', message: expect.stringContaining('db: Too small'), hint: HISTORY_HINTS.INVALID_ARGUMENTS },
    });
  });
});

describe('the nightly snapshot (shard op historySnapshot)', () => {
  it('starts a new generation for each database changed since its last snapshot, and none for one unchanged', async () => {
    const gens = async () => (await app.inject({ method: 'GET', url: '/v1/databases/acme%2Fscout/history', headers: as('ada') })).json().generations.length;
    expect(await write("INSERT INTO leads(email) VALUES ('late@x')")).toMatchObject({ ok: true });
    const before = await gens();
    const run = async () => {
      let snapshots = 0;
      for (let shard = 0; shard < sb.config.shardCount; shard++) {
        const out = await ops.run(shard, 'historySnapshot', {});
        expect(out.ok).toBe(true);
        snapshots += (out as { result: { snapshots: number } }).result.snapshots;
      }
      return snapshots;
    };
    expect(await run()).toBeGreaterThanOrEqual(1);
    expect(await gens()).toBe(before + 1);
    // Nothing changed since: no new snapshot of it.
    await run();
    expect(await gens()).toBe(before + 1);
  });
});

describe('the history client, called directly with no adapter in front', () => {
  it("refuses a member who is not an admin, and hides another workspace's database, before running anything", async () => {
    const history = new HistoryClient(ops, sb.config.shardCount);
    const bob = { member: { workspace: 'acme', name: 'bob', role: 'member' as const } };
    const oz = { member: { workspace: 'other', name: 'oz', role: 'admin' as const } };
    const by = { who: 'acme/@bob', via: 'key' as const };
    const before = await rows();
    const at = moment / 1000;
    for (const attempt of [
      () => history.history('acme/scout', bob),
      () => history.restore('acme/scout', { at, by }, bob),
      () => history.restore('acme/scout', { at, into: 'acme/copy', by }, bob),
      () => history.restoreFromBlob('acme/scout', { into: 'acme/copy', by }, bob),
    ]) {
      await expect(attempt()).rejects.toMatchObject({ code: 'NOT_PERMITTED', detail: expect.stringContaining('takes an admin of acme; bob is a member') });
    }
    await expect(history.history('acme/scout', oz)).rejects.toMatchObject({
      code: 'NOT_FOUND',
      detail: expect.stringMatching(/^there is no database acme\/scout in workspace /),
    });
    await expect(history.restore('acme/scout', { at, by }, oz)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await rows()).toBe(before);
    // The same client answers an admin of the workspace, and the operator at the CLI.
    const ada = { member: { workspace: 'acme', name: 'ada', role: 'admin' as const } };
    expect((await history.history('acme/scout', ada)).generations.length).toBeGreaterThanOrEqual(1);
    expect((await history.history('acme/scout', 'operator')).generations.length).toBeGreaterThanOrEqual(1);
  });
});

describe('GET /v1/databases/:db/activity against the rate limits', () => {
  // A page reads history's indexes and the database's rows: each counts a tenth of a call
  // against the member's and the workspace's budget, as a lookup of a call does (review 19, H29).
  it("counts each page as a lookup of the workspace's budget, and answers RATE_LIMITED with Retry-After past it", async () => {
    const k = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 1 }, history: new HistoryClient(ops, sb.config.shardCount) });
    try {
      const url = '/v1/databases/acme%2Fscout/activity?limit=1';
      for (let i = 0; i < 10; i++) expect((await k.app.inject({ method: 'GET', url, headers: as('ada') })).statusCode).toBe(200);
      const res = await k.app.inject({ method: 'GET', url, headers: as('ada') });
      expect(res.statusCode).toBe(429);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(res.json()).toMatchObject({ error: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) } });
    } finally {
      await k.close();
    }
  });

  // A dry run lists what it would take away from a page of the activity list: uncharged, a loop
  // of dry runs read that list on past the rate the activity route refuses it at (review R1).
  it('counts a dry run of a restore 15 calls and its page of activity, and answers RATE_LIMITED past the budget', async () => {
    // A workspace of its own: the tests before spent their workspaces' budgets for the window.
    const id = 'dry/runs';
    const file = databasePath(sb.config.dataDir, 'dry', 'runs', shardOf(id, sb.config.shardCount));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    buildActivity(sb.config.dataDir, file, 20, id).close();
    const dryKey = (await new MemberRegistry(redis, keysFor(sb.config.prefix)).add('dry', 'dee', 'admin')).key;
    // 45 calls a window: a dry run counts 15 (it plans the restore on the shard; session 34, T12).
    const k = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 45 }, history: new HistoryClient(ops, sb.config.shardCount) });
    try {
      const dryRun = () =>
        k.app.inject({
          method: 'POST',
          url: '/v1/databases/dry%2Fruns/restore',
          headers: { authorization: `Bearer ${dryKey}` },
          payload: { through: 'g0000000001', dryRun: true },
        });
      const first = await dryRun();
      expect(first.statusCode).toBe(200);
      expect(first.json().after.entries.length).toBeGreaterThan(0);
      const codes: number[] = [];
      for (let i = 0; i < 3; i++) codes.push((await dryRun()).statusCode);
      // 15 calls each, the first's read afresh (40 commits and rows) adding nothing whole: three pass, the fourth is refused.
      expect(codes).toEqual([200, 200, 429]);
    } finally {
      await k.close();
    }
  });

  // Issue 29: a first page reads the whole retained history; charged a tenth, a tenant could read
  // a big history again and again for little. It costs a call more per 10,000 commits and rows.
  it('charges a page that read the history afresh for what it read, and a kept one a tenth', async () => {
    // Another workspace than the test before's, whose budget it spent for the window.
    const id = 'other/big';
    const file = databasePath(sb.config.dataDir, 'other', 'big', shardOf(id, sb.config.shardCount));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // 2,500 calls: 2,500 commits and 2,500 rows read afresh, half a call (5 tenths) beyond the page's tenth.
    buildActivity(sb.config.dataDir, file, 2_500, id).close();
    const k = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 1 }, history: new HistoryClient(ops, sb.config.shardCount) });
    try {
      const url = '/v1/databases/other%2Fbig/activity?limit=1';
      const codes: number[] = [];
      for (let i = 0; i < 6; i++) codes.push((await k.app.inject({ method: 'GET', url, headers: as('oz') })).statusCode);
      // 10 tenths: the first page 6, the four kept after it one each, the sixth refused.
      expect(codes).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await k.close();
    }
  });
});
