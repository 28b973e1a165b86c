import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { type ApprovalService, MAX_BULK_DECISIONS } from '../../src/approvals/approval-service.ts';
import type { MemberRegistry } from '../../src/registry/members.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { withScripts } from '../../src/redis/lua-scripts.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withApprovalsApp } from '../helpers/approvals-app.ts';

// Issue 29 part 5: the inbox narrowed by agent, database and tool (in the core listing, for
// `GET /v1/approvals` and the web page alike), several approvals decided at once with one reason,
// each on its own (`POST /v1/approvals/decide`), and the Decided list in decision order.
let sb: Sandbox;
let redis: Redis;
let client: AgentDbClient;
let members: MemberRegistry;
let approvals: ApprovalService;
let app: FastifyInstance;
let key: Record<string, string>;

withApprovalsApp(
  {
    members: [
      ['acme', 'ada', 'admin'],
      ['acme', 'bob', 'member'],
      ['other', 'oz', 'admin'],
    ],
  },
  (box) => ({ sb, redis, client, members, approvals, app, key } = box),
);

beforeAll(async () => {
  for (const agent of ['scout', 'miner']) {
    const made = await client.call({
      workspace: 'acme',
      agent,
      settings: { database: 'agent' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE t (x)' },
    });
    expect(made).toMatchObject({ ok: true });
  }
});

async function park(input: CallInput): Promise<string> {
  const answer = await client.call(input, { wait: false });
  expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval', approval: { id: expect.any(String) } });
  return (answer as unknown as { approval: { id: string } }).approval.id;
}
let n = 0;
/** A parked insert by `agent` of `workspace` into its own table t. */
const parkInsert = (agent: string, workspace = 'acme') =>
  park({ workspace, agent, settings: { database: 'agent', approval: 'write' }, tool: 'DATA_WRITE_SQL', arguments: { sql: `INSERT INTO t VALUES (${++n})` } });
/** A parked drop of `agent`'s table t. */
const parkDrop = (agent: string) => park({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_DROP_TABLE', arguments: { table: 't' } });

/** Returns once Redis's clock (which dates decisions) is past `ms`, so two decisions never share a millisecond. */
async function redisClockPasses(ms: number): Promise<void> {
  for (;;) {
    const [s, us] = await redis.time();
    if (Number(s) * 1000 + Math.floor(Number(us) / 1000) > ms) return;
  }
}
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const list = async (k: string, query: string) => {
  const res = await app.inject({ method: 'GET', url: `/v1/approvals?${query}`, headers: bearer(k) });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().approvals as { id: string }[]).map((a) => a.id);
};
const bulk = (k: string, payload: unknown) =>
  app.inject({ method: 'POST', url: '/v1/approvals/decide', headers: bearer(k), payload: payload as Record<string, unknown> });

describe('filters', () => {
  let scoutWrite: string;
  let minerWrite: string;
  let minerDrop: string;
  beforeAll(async () => {
    scoutWrite = await parkInsert('scout');
    minerWrite = await parkInsert('miner');
    minerDrop = await parkDrop('miner');
  });

  it('narrows GET /v1/approvals by agent, database and tool, and by several at once', async () => {
    expect(await list(key.bob!, 'agent=scout')).toEqual([scoutWrite]);
    expect(await list(key.bob!, 'agent=miner')).toEqual([minerDrop, minerWrite]);
    expect(await list(key.bob!, `database=${encodeURIComponent('acme/miner')}`)).toEqual([minerDrop, minerWrite]);
    expect(await list(key.bob!, 'tool=DATA_DROP_TABLE')).toEqual([minerDrop]);
    expect(await list(key.bob!, 'agent=miner&tool=DATA_WRITE_SQL')).toEqual([minerWrite]);
    expect(await list(key.bob!, 'agent=scout&tool=DATA_DROP_TABLE')).toEqual([]);
    expect(await list(key.bob!, 'agent=nobody')).toEqual([]);
  });

  it('narrows the inbox page in the core, with the choices the workspace has', async () => {
    const page = await approvals.page({ workspace: 'acme', state: 'pending', offset: 0, limit: 25, filter: { agent: 'miner' } });
    expect(page.approvals.map((a) => a.id)).toEqual([minerDrop, minerWrite]);
    expect(page.total).toBe(2);
    expect(page.choices).toEqual({ agent: ['miner', 'scout'], database: ['acme/miner', 'acme/scout'], tool: ['DATA_DROP_TABLE', 'DATA_WRITE_SQL'] });
  });

  it('finds an approval recorded before agent, tool and database were kept beside its request', async () => {
    // As every approval made by an earlier version is stored: those fields only in the request.
    const record = keysFor(sb.config.prefix).approval(scoutWrite);
    await redis.hdel(record, 'agent', 'tool', 'database');
    expect(await list(key.bob!, 'agent=scout&tool=DATA_WRITE_SQL&database=acme%2Fscout')).toEqual([scoutWrite]);
    // Read from the request once, then kept beside it.
    expect(await redis.hmget(record, 'agent', 'tool', 'database')).toEqual(['scout', 'DATA_WRITE_SQL', 'acme/scout']);
    await redis.hdel(record, 'agent', 'tool', 'database');
    const page = await approvals.page({ workspace: 'acme', state: 'pending', offset: 0, limit: 25, filter: { database: 'acme/scout' } });
    expect(page.approvals.map((a) => a.id)).toEqual([scoutWrite]);
    // A record pruned meanwhile is not made again by the backfill.
    const gone = keysFor(sb.config.prefix).approval('ap_pruned');
    expect(await withScripts(redis).agentdbApprovalFacets(gone, 'scout', 'DATA_WRITE_SQL', 'acme/scout')).toBe(0);
    expect(await redis.exists(gone)).toBe(0);
  });

  it('refuses a filter that is not a name with 400 INVALID_ARGUMENTS', async () => {
    for (const url of ['/v1/approvals?agent=../x', '/v1/approvals?tool=', `/v1/approvals?database=${'d'.repeat(201)}`]) {
      const res = await app.inject({ method: 'GET', url, headers: bearer(key.bob!) });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('INVALID_ARGUMENTS');
    }
  });

  it('counts pending approvals by database', async () => {
    const counts = await approvals.pendingByDatabase('acme');
    expect(counts.get('acme/miner')).toBe(2);
    expect(counts.get('acme/scout')).toBe(1);
    expect((await approvals.pendingByDatabase('other')).get('acme/miner')).toBeUndefined();
  });

  it('is left with no approval pending', async () => {
    const res = await bulk(key.ada!, { ids: [scoutWrite, minerWrite, minerDrop], decision: 'reject', reason: 'tidy up' });
    expect(res.statusCode).toBe(200);
    expect((res.json().results as { ok: boolean }[]).every((r) => r.ok)).toBe(true);
  });
});

describe('POST /v1/approvals/decide', () => {
  it('decides a mixed batch one by one: the one already decided says so, another workspace answers NOT_FOUND, the rest go through', async () => {
    const a = await parkInsert('scout');
    const b = await parkInsert('scout');
    const c = await parkInsert('miner');
    const theirs = await parkInsert('scout', 'other');
    // Someone else got to b first.
    const first = await app.inject({
      method: 'POST',
      url: `/v1/approvals/${b}/decision`,
      headers: bearer(key.bob!),
      payload: { decision: 'reject', reason: 'no' },
    });
    expect(first.statusCode).toBe(200);

    const res = await bulk(key.ada!, { ids: [a, b, theirs, c], decision: 'approve', reason: 'checked the batch' });
    expect(res.statusCode).toBe(200);
    const results = res.json().results as {
      id: string;
      ok: boolean;
      code?: string;
      detail?: string;
      approval?: { state: string; decidedBy: string; reason: string };
    }[];
    expect(results.map((r) => r.id)).toEqual([a, b, theirs, c]);
    expect(results[0]).toMatchObject({ ok: true, approval: { state: 'approved', decidedBy: 'ada', reason: 'checked the batch' } });
    expect(results[1]).toMatchObject({ ok: false, code: 'APPROVAL_CONFLICT', detail: expect.stringContaining('already rejected by bob') });
    expect(results[2]).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    expect(results[2]!.detail).not.toContain('scout');
    expect(results[3]).toMatchObject({ ok: true, approval: { state: 'approved' } });

    // Each ran as its own call, bound to its own approval.
    expect(await approvals.get(b)).toMatchObject({ state: 'rejected', decidedBy: 'bob' });
    expect(await approvals.get(theirs)).toMatchObject({ state: 'pending' });
    for (const id of [a, c]) {
      await expect.poll(async () => (await approvals.get(id))?.ran, { timeout: 20_000 }).toMatchObject({ ok: true });
    }
    const oz = await bulk(key.oz!, { ids: [theirs], decision: 'reject' });
    expect(oz.json().results).toEqual([expect.objectContaining({ id: theirs, ok: true })]);
  });

  it('refuses more than the cap, an empty list, a repeated id or a bad decision whole, deciding nothing', async () => {
    const id = await parkInsert('scout');
    const many = [id, ...Array.from({ length: MAX_BULK_DECISIONS }, (_, i) => `ap_missing${i}`)];
    const cases: [unknown, RegExp][] = [
      [{ ids: many, decision: 'approve' }, new RegExp(`at most ${MAX_BULK_DECISIONS}`)],
      [{ ids: [], decision: 'approve' }, /ids/],
      [{ ids: [id], decision: 'maybe' }, /decision/],
      [{ ids: [id, id], decision: 'approve' }, /named twice/],
    ];
    for (const [payload, message] of cases) {
      const res = await bulk(key.ada!, payload);
      expect(res.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
      expect(res.json().error.code).toBe('INVALID_ARGUMENTS');
      expect(res.json().error.message).toMatch(message);
    }
    // The core keeps the cap for every adapter, not only HTTP's schema.
    const core = await approvals.decideMany(many, { decision: 'approve', by: { workspace: 'acme', name: 'ada', role: 'admin' }, via: 'key' });
    expect(core).toMatchObject({ ok: false, code: 'INVALID_ARGUMENTS' });
    expect((await approvals.get(id))?.state).toBe('pending');
    await bulk(key.ada!, { ids: [id], decision: 'reject' });
  });

  it('lists the decided in decision order, newest decision first', async () => {
    const older = await parkInsert('miner');
    const newer = await parkInsert('miner');
    // Decided in the other order than parked: the older call is the newest decision.
    await bulk(key.ada!, { ids: [newer], decision: 'reject' });
    await redisClockPasses((await approvals.get(newer))!.decidedAt!);
    await bulk(key.ada!, { ids: [older], decision: 'reject' });
    const page = await approvals.page({ workspace: 'acme', state: 'decided', offset: 0, limit: 2 });
    expect(page.approvals.map((a) => a.id)).toEqual([older, newer]);
    const all = await approvals.page({ workspace: 'acme', state: 'decided', offset: 0, limit: 100 });
    const times = all.approvals.map((a) => a.decidedAt ?? 0);
    expect(times).toEqual([...times].sort((x, y) => y - x));
  });
});
