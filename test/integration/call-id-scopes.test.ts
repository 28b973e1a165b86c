import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallInput } from '../../src/contracts/call.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Issue 25 part 5: a call id is its caller's idempotency key whatever database the call reaches.
// A call's job sits on its database's shard queue, so the same id with another scope reached
// another queue and ran as a second call: 2 rows inserted, a CREATE TABLE run and charged, and
// the id then answered the second call.

let sb: Sandbox;
let k: KeyedApp;
let client: AgentDbClient;
let agentKey: string;
const SHARDS = 4;
// A workspace whose shared database and whose agent's own sit on different shards: the case the
// per-queue check missed (on one shard BullMQ's own job-id check already caught it).
const WS = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7'].find((w) => shardOf(databaseId(w), SHARDS) !== shardOf(databaseId(w, 'scout'), SHARDS))!;
const settings = { database: 'workspace', sharedData: true } as const;
const as = (callId: string, tool: string, args: Record<string, unknown>): CallInput => ({
  workspace: WS,
  agent: 'scout',
  settings,
  callId,
  tool,
  arguments: args,
});

async function sharedRows(): Promise<unknown[][]> {
  const read = await client.call({
    workspace: WS,
    agent: 'scout',
    settings,
    tool: 'DATA_QUERY_SQL',
    arguments: { sql: 'SELECT v FROM shared_t ORDER BY v', scope: 'workspace' },
  });
  expect(read).toMatchObject({ ok: true });
  return (read as unknown as { result: { rows: unknown[][] } }).result.rows;
}

async function ownTables(): Promise<string[]> {
  const d = await client.call({ workspace: WS, agent: 'scout', settings, tool: 'DATA_DESCRIBE_SCHEMA', arguments: {} });
  expect(d).toMatchObject({ ok: true });
  return ((d as unknown as { result: { tables: { name: string }[] } }).result.tables ?? []).map((t) => t.name);
}

async function writeCredits(): Promise<number> {
  const rows = await readUsage(k.redis, keysFor(sb.config.prefix), WS);
  return rows.filter((r) => r.agent === 'scout' && r.tool === 'DATA_WRITE_SQL').reduce((n, r) => n + r.credits, 0);
}

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: String(SHARDS) });
  await sb.pool();
  k = keyedApp(sb);
  client = k.client;
  agentKey = await k.agentKey(WS, 'scout', { displayName: 'Scout', settings });
  expect(
    await client.call({
      workspace: WS,
      agent: 'scout',
      settings,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE shared_t (v TEXT)', scope: 'workspace' },
    }),
  ).toMatchObject({ ok: true });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

describe('client library: a call id sent again with another scope', () => {
  it('is refused with IDEMPOTENCY_CONFLICT, runs and charges nothing, and the id keeps answering the first call', async () => {
    const first = await client.call(as('c2', 'DATA_WRITE_SQL', { sql: 'INSERT INTO shared_t VALUES (?)', params: ['one'], scope: 'workspace' }));
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });
    const credits = await writeCredits();

    // The same statement into the agent's own database under the same id.
    const sameSqlOtherScope = await client.call(as('c2', 'DATA_WRITE_SQL', { sql: 'INSERT INTO shared_t VALUES (?)', params: ['one'] }));
    expect(sameSqlOtherScope).toMatchObject({
      ok: false,
      callId: 'c2',
      error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining(`the database (${WS}, now ${WS}/scout)`) },
    });
    expect((sameSqlOtherScope as { error: { message: string } }).error.message).toContain('arguments.scope');
    // Another statement, no scope, answered at once (?wait=false's path).
    const probe = await client.call(as('c2', 'DATA_WRITE_SQL', { sql: 'CREATE TABLE idem_probe (x)' }), { wait: false });
    expect(probe).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });

    expect(await ownTables()).not.toContain('idem_probe');
    expect(await sharedRows()).toEqual([['one']]);
    expect(await writeCredits()).toBe(credits);
    expect(await client.result('c2', { workspace: WS, agent: 'scout' })).toEqual(first);
    // The id stays taken as long as its call's job can answer for it (a day to be taken, the
    // approval wait, the kept result: 3 days at the defaults), not for ever: it is Redis bytes a caller makes.
    const ttl = await k.redis.ttl(keysFor(sb.config.prefix).callIdClaim(`${WS}.scout.c2`));
    expect(ttl).toBeGreaterThan(2 * 24 * 3600);
    expect(ttl).toBeLessThanOrEqual(3 * 24 * 3600);

    // The same call again is a replay: the first outcome, nothing run again.
    expect(await client.call(as('c2', 'DATA_WRITE_SQL', { params: ['one'], scope: 'workspace', sql: 'INSERT INTO shared_t VALUES (?)' }))).toEqual(first);
    expect(await sharedRows()).toEqual([['one']]);
  });

  it('of two different calls sent at once under one id, exactly one runs', async () => {
    const answers = await Promise.all([
      client.call(as('race-1', 'DATA_WRITE_SQL', { sql: 'INSERT INTO shared_t VALUES (?)', params: ['race'], scope: 'workspace' })),
      client.call(as('race-1', 'DATA_WRITE_SQL', { sql: 'CREATE TABLE race_probe (x)' })),
    ]);
    const codes = answers.map((a) => (a.ok ? 'ok' : (a as { error: { code: string } }).error.code)).sort();
    expect(codes).toEqual(['IDEMPOTENCY_CONFLICT', 'ok']);
    const ran = answers.find((a) => a.ok)!;
    const effects = [(await sharedRows()).some(([v]) => v === 'race'), (await ownTables()).includes('race_probe')];
    expect(effects.filter(Boolean)).toHaveLength(1);
    expect(await client.result('race-1', { workspace: WS, agent: 'scout' })).toEqual(ran);
  });
});

describe('HTTP /v1/calls: a call id sent again with another scope', () => {
  const post = (body: unknown, query = '') =>
    k.app.inject({ method: 'POST', url: `/v1/calls${query}`, headers: { authorization: `Bearer ${agentKey}` }, payload: body as object });

  it('answers 409 IDEMPOTENCY_CONFLICT, runs nothing, and GET keeps answering the first call; the same call replays', async () => {
    const body = { tool: 'DATA_WRITE_SQL', callId: 'h2', arguments: { sql: 'INSERT INTO shared_t VALUES (?)', params: ['http'], scope: 'workspace' } };
    const made = await post(body);
    expect(made.statusCode).toBe(200);
    const first = made.json();
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });

    for (const [other, query] of [
      [{ ...body, arguments: { sql: 'INSERT INTO shared_t VALUES (?)', params: ['http'], scope: 'agent' } }, ''],
      [{ tool: 'DATA_WRITE_SQL', callId: 'h2', arguments: { sql: 'CREATE TABLE idem_probe_http (x)' } }, '?wait=false'],
      [{ tool: 'DATA_QUERY_SQL', callId: 'h2', arguments: { sql: 'SELECT 1', scope: 'workspace' } }, ''],
    ] as const) {
      const refused = await post(other, query);
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toMatchObject({ ok: false, callId: 'h2', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    }
    expect(await ownTables()).not.toContain('idem_probe_http');
    expect((await sharedRows()).filter(([v]) => v === 'http')).toHaveLength(1);

    const got = await k.app.inject({ method: 'GET', url: '/v1/calls/h2', headers: { authorization: `Bearer ${agentKey}` } });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(first);
    const again = await post(body);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first);
    expect((await sharedRows()).filter(([v]) => v === 'http')).toHaveLength(1);
  });
});
