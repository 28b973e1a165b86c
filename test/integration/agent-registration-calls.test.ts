import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 28, L1: an agent key's calls were keyed by the agent's name. An agent removed and
// registered again under its name found the earlier registration's call ids taken (a write under
// one answered IDEMPOTENCY_CONFLICT, or, the same SQL sent, the earlier write's outcome: the new
// write never ran), and listed and read the earlier registration's MCP tasks. An agent key's
// calls are now bound to its registration's creation, as a member's are to the member record.

let sb: Sandbox;
let k: KeyedApp;
let pool: ShardWorkerPool;
let base: string;
const WS = 'acme';
const OWN_DB = { displayName: 'Scout', settings: { database: 'agent' as const } };

beforeAll(async () => {
  sb = sandbox();
  pool = await sb.pool();
  k = keyedApp(sb);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  // A pool's start on a machine the other suites load took past the default minute.
}, 120_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

async function send(key: string, method: 'GET' | 'POST', url: string, body?: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const insert = (callId: string, v: string) => ({ tool: 'DATA_WRITE_SQL', callId, arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [v] } });

async function rows(key: string): Promise<unknown[]> {
  const read = await send(key, 'POST', '/v1/calls', { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t ORDER BY rowid' } });
  return ((read.body.result as { rows: unknown[][] }).rows ?? []).map((r) => r[0]);
}

/** `agentdb agents remove`, then `agents set` of the same name and a new key. */
async function registeredAgain(slug: string, profile = OWN_DB): Promise<string> {
  expect(await new AgentRegistry(k.redis, keysFor(sb.config.prefix)).remove(WS, slug)).toBe(true);
  return k.agentKey(WS, slug, profile);
}

/** Everything Redis holds of the calls under `callId` (jobs, claims, ledger), as after Redis came back empty. */
async function forgetInRedis(callId: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${sb.config.prefix}*${callId}*`, 'COUNT', 1000);
      cursor = next;
      if (found.length) await redis.del(...found);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

describe('an agent registered again under its name', () => {
  it("starts with none of the earlier registration's call ids taken: its writes run, none answered with the earlier outcome", async () => {
    const first = await k.agentKey(WS, 'scout', OWN_DB);
    expect((await send(first, 'POST', '/v1/calls', { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })).body).toMatchObject({
      ok: true,
    });
    const earlier = await send(first, 'POST', '/v1/calls', insert('w-same', 'one'));
    expect(earlier.body).toMatchObject({ ok: true, result: { changes: 1 } });
    expect((await send(first, 'POST', '/v1/calls', insert('w-other', 'two'))).body).toMatchObject({ ok: true });

    const again = await registeredAgain('scout');
    // The same call as the earlier registration's, sent by the new one: a call of its own, which runs.
    const same = await send(again, 'POST', '/v1/calls', insert('w-same', 'one'));
    expect(same.body).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(same.body).not.toEqual(earlier.body);
    // Another statement under the earlier one's id: not refused as the earlier call's.
    expect((await send(again, 'POST', '/v1/calls', insert('w-other', 'three'))).body).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await rows(again)).toEqual(['one', 'two', 'one', 'three']);
    expect((await send(again, 'GET', '/v1/calls/w-same')).body).toEqual(same.body);
  });

  it("is not answered from the database's record of the earlier registration's write once Redis forgot both", async () => {
    const first = await k.agentKey(WS, 'ranger', OWN_DB);
    expect((await send(first, 'POST', '/v1/calls', { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })).body).toMatchObject({
      ok: true,
    });
    expect((await send(first, 'POST', '/v1/calls', insert('r-write', 'r1'))).body).toMatchObject({ ok: true });
    await forgetInRedis('r-write');
    await pool.stop();
    pool = await sb.pool();

    const again = await registeredAgain('ranger');
    const mine = await send(again, 'POST', '/v1/calls', insert('r-write', 'r1'));
    expect(mine.body).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await rows(again)).toEqual(['r1', 'r1']);
    // Its own write keeps exactly-once by the database's record, with Redis forgetting it too.
    await forgetInRedis('r-write');
    await pool.stop();
    pool = await sb.pool();
    expect((await send(again, 'POST', '/v1/calls', insert('r-write', 'r1'))).body).toEqual(mine.body);
    expect((await send(again, 'POST', '/v1/calls', insert('r-write', 'r2'))).body).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows(again)).toEqual(['r1', 'r1']);
  }, 120_000);
});

/** One JSON-RPC request to `/mcp` with `key`, answered as its `result` or `error`. */
async function rpc(key: string, method: string, params: Record<string, unknown>): Promise<{ result?: Record<string, unknown>; error?: { message: string } }> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as { result?: Record<string, unknown>; error?: { message: string } };
}

it("an agent registered again under its name does not see the earlier registration's MCP tasks", async () => {
  const profile = { displayName: 'Pilot', settings: { database: 'agent' as const, approval: 'write' as const } };
  const first = await k.agentKey(WS, 'pilot', profile);
  // A write waiting for a person: a task of its own.
  const made = await rpc(first, 'tools/call', { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE p (v TEXT)' }, task: { ttl: 60_000 } });
  const taskId = (made.result!.task as { taskId: string }).taskId;
  expect(await rpc(first, 'tasks/list', {})).toMatchObject({ result: { tasks: [{ taskId }] } });

  const again = await registeredAgain('pilot', profile);
  expect(await rpc(again, 'tasks/list', {})).toMatchObject({ result: { tasks: [] } });
  expect((await rpc(again, 'tasks/get', { taskId })).error?.message).toMatch(/not found/i);
  expect((await rpc(again, 'tasks/result', { taskId })).error?.message).toMatch(/not found/i);
});

it("an agent key's MCP task filed before tasks were bound to the registration is found by its id, by this registration only", async () => {
  const profile = { displayName: 'Older', settings: { database: 'agent' as const, approval: 'write' as const } };
  const key = await k.agentKey(WS, 'older', profile);
  const made = await rpc(key, 'tools/call', { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE o (v TEXT)' }, task: { ttl: 60_000 } });
  const taskId = (made.result!.task as { taskId: string }).taskId;
  // As the server before the upgrade filed it: under the bare `<workspace>.<agent>`.
  const recordKey = keysFor(sb.config.prefix).mcpTask(taskId);
  const record = JSON.parse((await k.redis.get(recordKey))!) as { owner: string };
  expect(record.owner).toMatch(/^acme\.older@\d+$/);
  await k.redis.set(recordKey, JSON.stringify({ ...record, owner: 'acme.older' }), 'KEEPTTL');
  expect(await rpc(key, 'tasks/get', { taskId })).toMatchObject({ result: { taskId } });

  const again = await registeredAgain('older', profile);
  expect((await rpc(again, 'tasks/get', { taskId })).error?.message).toMatch(/not found/i);
});
