import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T2 (session 26): a member's calls were keyed by the name (`@bob`). A member
// revoked and added again under the same name — another person — read the first one's results at
// GET /v1/calls/<id>, and a call id the first one had used answered IDEMPOTENCY_CONFLICT, saying
// their SQL differed. A member's calls are now bound to the member record's creation.

let sb: Sandbox;
let k: KeyedApp;
let pool: ShardWorkerPool;
let base: string;
let members: MemberRegistry;
const WS = 'acme';

beforeAll(async () => {
  sb = sandbox();
  pool = await sb.pool();
  k = keyedApp(sb);
  members = new MemberRegistry(k.redis, keysFor(sb.config.prefix));
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  const admin = await k.memberKey(WS, 'root', 'admin');
  expect(await post(admin, { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })).toMatchObject({ status: 200, body: { ok: true } });
  // A pool's start on a machine the other suites load took past the default minute.
}, 120_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

async function post(key: string, body: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/v1/calls`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function get(key: string, id: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/v1/calls/${id}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const insert = (callId: string, v: string) => ({ tool: 'DATA_WRITE_SQL', callId, arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [v] } });
const select = (callId: string, where: string) => ({ tool: 'DATA_QUERY_SQL', callId, arguments: { sql: 'SELECT v FROM t WHERE v LIKE ?', params: [where] } });

async function rows(key: string, like: string): Promise<unknown[]> {
  const read = await post(key, { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t WHERE v LIKE ? ORDER BY rowid', params: [like] } });
  return ((read.body.result as { rows: unknown[][] }).rows ?? []).map((r) => r[0]);
}

/** `members revoke` then `members add` of the same name: another person's key. */
async function againAs(name: string): Promise<string> {
  expect(await members.revoke(WS, name)).toBe(true);
  return k.memberKey(WS, name, 'member');
}

/**
 * Everything Redis holds of the calls under `callId` (jobs, claims), as after Redis came back
 * empty or the results expired: only the database's record of the write and the call-id ledger are left.
 */
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

/** The shard workers stopped and started again. */
async function restartWorkers(): Promise<void> {
  await pool.stop();
  pool = await sb.pool();
}

describe('a member added again under the same name', () => {
  it("reads none of the first one's calls, and uses their call ids for calls of its own", async () => {
    const first = await k.memberKey(WS, 'bob', 'member');
    expect(await post(first, insert('a-write', 'bob1-secret'))).toMatchObject({ status: 200, body: { ok: true } });
    const firstRead = await post(first, select('a-read', 'bob1%'));
    expect(firstRead.body).toMatchObject({ ok: true, result: { rows: [['bob1-secret']] } });

    const again = await againAs('bob');
    for (const id of ['a-write', 'a-read']) {
      const looked = await get(again, id);
      expect(looked.status).toBe(404);
      expect(looked.body).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
      expect(JSON.stringify(looked.body)).not.toContain('bob1');
    }

    // The same ids, other calls: they run as the new member's own, neither refused nor answered the old outcome.
    const read = await post(again, select('a-read', 'nothing%'));
    expect(read.body).toMatchObject({ ok: true, result: { rows: [] } });
    const wrote = await post(again, insert('a-write', 'bob2'));
    expect(wrote.body).toMatchObject({ ok: true, result: { changes: 1 } });
    expect((await get(again, 'a-read')).body).toEqual(read.body);
    expect((await get(again, 'a-write')).body).toEqual(wrote.body);
    expect(await rows(again, 'bob%')).toEqual(['bob1-secret', 'bob2']);
  });

  it("keeps exactly-once for its own call under an id the first one used, with only the database's record left", async () => {
    const first = await k.memberKey(WS, 'carol', 'member');
    expect(await post(first, insert('c-write', 'carol1'))).toMatchObject({ status: 200, body: { ok: true } });
    const again = await againAs('carol');

    const mine = await post(again, insert('c-write', 'carol2'));
    expect(mine.body).toMatchObject({ ok: true, result: { changes: 1 } });
    expect((await post(again, insert('c-write', 'carol2'))).body).toEqual(mine.body);

    await forgetInRedis('c-write');
    await restartWorkers();
    // Sent again: the write's record in the database answers it, and nothing is written twice.
    expect((await post(again, insert('c-write', 'carol2'))).body).toEqual(mine.body);
    expect((await post(again, insert('c-write', 'carol3'))).body).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows(again, 'carol%')).toEqual(['carol1', 'carol2']);
  });
});

describe('a member call made before calls were bound to the member record', () => {
  /** A call as an HTTP server before the binding enqueued it: `@<name>`, the member without `since`. */
  const unbound = (name: string, callId: string, v: string) =>
    k.client.call({ workspace: WS, agent: `@${name}`, member: { name, role: 'member' }, ...insert(callId, v) });

  it("is its member's when made since the member record was: found, and sent again answers its one outcome", async () => {
    await k.memberKey(WS, 'dan', 'member');
    const key = await againAs('dan');
    const made = await unbound('dan', 'd-old', 'dan-old');
    expect(made).toMatchObject({ ok: true, result: { changes: 1 } });

    expect((await get(key, 'd-old')).body).toEqual(made);
    expect((await post(key, insert('d-old', 'dan-old'))).body).toEqual(made);
    await forgetInRedis('d-old');
    await restartWorkers();
    expect((await post(key, insert('d-old', 'dan-old'))).body).toEqual(made);
    expect((await post(key, insert('d-old', 'dan-other'))).body).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows(key, 'dan%')).toEqual(['dan-old']);
  });

  it('is not a later member’s of the name: not found, and its id runs their own call', async () => {
    await k.memberKey(WS, 'erin', 'member');
    const made = await unbound('erin', 'e-old', 'erin1');
    expect(made).toMatchObject({ ok: true });
    const again = await againAs('erin');

    expect((await get(again, 'e-old')).body).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
    const mine = await post(again, insert('e-old', 'erin2'));
    expect(mine.body).toMatchObject({ ok: true, result: { changes: 1 } });
    await forgetInRedis('e-old');
    expect((await post(again, insert('e-old', 'erin2'))).body).toEqual(mine.body);
    expect(await rows(again, 'erin%')).toEqual(['erin1', 'erin2']);
  });
});
