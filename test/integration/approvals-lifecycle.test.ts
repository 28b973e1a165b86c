import { afterEach, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import type { AwaitingAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { Redis } from 'ioredis';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

let sb: Sandbox;
let own: OwnRedis | undefined;
afterEach(async () => {
  await sb.cleanup();
  await own?.remove();
  own = undefined;
});

const who = { workspace: 'acme', agent: 'life', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'life', settings: { database: 'agent' as const } };

async function addMember(prefix: string, name: string) {
  const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  await new MemberRegistry(redis, keysFor(prefix)).add('acme', name, 'member');
  redis.disconnect();
}

describe('expiry', () => {
  it('finishes an undecided call with APPROVAL_EXPIRED; it never runs, and a late decision is refused', async () => {
    sb = sandbox({ APPROVAL_TTL_MS: '1500' });
    await sb.pool();
    await addMember(sb.config.prefix, 'alice');
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const parked = (await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } }, { wait: false })) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');
    const end = await client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect(end).toMatchObject({ ok: false, error: { code: 'APPROVAL_EXPIRED' } });
    expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({
      ok: false,
      code: 'APPROVAL_EXPIRED',
    });
    expect(await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({
      result: { rows: [[0]] },
    });
  });
});

describe('restarts', () => {
  it('keeps parked calls across a worker restart, and runs each exactly once when approved', async () => {
    sb = sandbox();
    const first = await sb.pool();
    await addMember(sb.config.prefix, 'alice');
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const parked = await Promise.all(
      [1, 2, 3].map((i) => client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (?)', params: [i] } }, { wait: false })),
    );
    await first.stop();
    await sb.pool();
    const ends = parked.map((p) => client.result(p.callId, { ...whoOf(p as AwaitingAnswer), wait: true }));
    for (const p of parked) {
      expect(await client.decide((p as AwaitingAnswer).approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
    }
    expect((await Promise.all(ends)).map((e) => e.ok)).toEqual([true, true, true]);
    expect(await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT x FROM t ORDER BY x' } })).toMatchObject({
      result: { rows: [[1], [2], [3]] },
    });
  });
});

describe('a waiting client', () => {
  it('still gets the outcome when every Redis connection drops while it waits', async () => {
    own = await OwnRedis.start();
    sb = sandbox({ REDIS_URL: own.url });
    await sb.pool();
    const admin = new Redis(own.url);
    await new MemberRegistry(admin, keysFor(sb.config.prefix)).add('acme', 'alice', 'member');
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const parked = (await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (7)' } }, { wait: false })) as AwaitingAnswer;
    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });

    // Every other connection (the waiting client's event reader included) is cut; each must
    // reconnect and pick up where it was.
    expect(Number(await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes'))).toBeGreaterThan(2);
    const other = sb.client();
    expect(await other.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
    expect(await waiting).toMatchObject({ ok: true, result: { changes: 1 } });
    admin.disconnect();
  });
});
