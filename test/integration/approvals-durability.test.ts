import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { MemberRegistry } from '../../src/registry/members.ts';
import type { AwaitingAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';
import { whoOf } from '../helpers/who.ts';

let own: OwnRedis;
let sb: Sandbox;
afterAll(async () => {
  await sb?.cleanup().catch(() => undefined);
  await own?.remove();
});

const who = { workspace: 'acme', agent: 'durable', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'durable', settings: { database: 'agent' as const } };

describe('pending approvals and a Redis restart', () => {
  it('survive Redis restarting with AOF on, and each runs exactly once when approved', async () => {
    own = await OwnRedis.start();
    sb = sandbox({ REDIS_URL: own.url });
    const worker = await sb.pool();
    const admin = new Redis(own.url);
    await new MemberRegistry(admin, keysFor(sb.config.prefix)).add('acme', 'alice', 'member');
    admin.disconnect();

    const before = sb.client();
    await before.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (i INTEGER)' } });
    const parked = (await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        before.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (?)', params: [i] } }, { wait: false }),
      ),
    )) as AwaitingAnswer[];
    expect(parked.every((p) => p.status === 'awaiting_approval')).toBe(true);

    await worker.stop();
    await before.close();
    await own.stop();
    await own.start();

    await sb.pool();
    const after = sb.client();
    const ends = parked.map((p) => after.result(p.callId, { ...whoOf(p), wait: true }));
    for (const p of parked) {
      expect(await after.result(p.callId, whoOf(p))).toMatchObject({ status: 'awaiting_approval' });
      expect(await after.decide(p.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
    }
    expect((await Promise.all(ends)).map((e) => e.ok)).toEqual([true, true, true, true, true]);
    expect(await after.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT i FROM t ORDER BY i' } })).toMatchObject({
      result: { rows: [[0], [1], [2], [3], [4]] },
    });
  });
});
