import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Review R2 (faults): a write parked for approval, approved, and committed; then Redis came back
// empty (no AOF), so its job and approval were gone. Sent again under its own call id, it was
// parked again: a person was asked about a write that had already run, and a rejection answered
// APPROVAL_REJECTED for a committed write. The database's exactly-once record answers it instead.

let own: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
const who = { workspace: 'acme', agent: 'parked', settings: { database: 'agent' as const, approval: 'write' as const } };
const write = (callId: string) => ({ ...who, callId, tool: 'DATA_WRITE_SQL' as const, arguments: { sql: 'INSERT INTO t VALUES (?)', params: [callId] } });

async function memberKey(name: string): Promise<string> {
  const admin = new Redis(own.url);
  try {
    return (await new MemberRegistry(admin, keysFor(sb.config.prefix)).add('acme', name, 'admin')).key;
  } finally {
    admin.disconnect();
  }
}

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: own.url });
  await sb.pool();
  client = sb.client();
  expect(
    await client.call({
      workspace: 'acme',
      agent: 'parked',
      settings: { database: 'agent' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE t (id TEXT)' },
    }),
  ).toMatchObject({ ok: true });
}, 60_000);
afterAll(async () => {
  await sb.cleanup();
  await own.remove();
});

describe('a parked write that committed, then Redis came back empty', () => {
  it('sent again under its id answers what it committed, and asks nobody again', async () => {
    const key = await memberKey('ada');
    const parked = (await client.call(write('P'), { wait: false })) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');
    expect(await client.decide(parked.approval.id, { decision: 'approve', key, reason: 'ok' })).toMatchObject({ ok: true });
    const done = await client.result('P', { workspace: 'acme', agent: 'parked', wait: true });
    expect(done).toMatchObject({ ok: true, result: { changes: 1 } });

    await own.kill();
    own.wipe();
    await own.start();

    const again = await client.call(write('P'), { wait: false });
    expect(again, `a committed write was not answered from its record: ${JSON.stringify(again)}`).toMatchObject({
      ok: true,
      callId: 'P',
      result: { changes: 1 },
    });
    const rows = await client.call({
      workspace: 'acme',
      agent: 'parked',
      settings: { database: 'agent' },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT id FROM t' },
    });
    expect(rows).toMatchObject({ ok: true, result: { rows: [['P']] } });
  }, 60_000);
});
