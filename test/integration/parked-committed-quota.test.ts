import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A write that waits for a person is refused QUOTA_EXCEEDED before it parks when its workspace is
// past its byte quota (review O1). Asked before the database's exactly-once record, that refusal
// answered a write that had committed (approved while the workspace had room, its job then lost
// with a Redis come back empty) as QUOTA_EXCEEDED: a committed write reported as refused.
const QUOTA = 256 * 1024;
let own: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
const who = { workspace: 'acme', agent: 'parked', settings: { database: 'agent' as const } };
const gated = { ...who, settings: { database: 'agent' as const, approval: 'write' as const } };
const fill = 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) INSERT INTO big SELECT NULL, randomblob(10000) FROM c';

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: own.url, WORKSPACE_MAX_BYTES: String(QUOTA) });
  // Every write walks the folder afresh: each sees the bytes the write before it left.
  await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
  client = sb.client();
  for (const sql of ['CREATE TABLE t (id TEXT)', 'CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)']) {
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject({ ok: true });
  }
}, 60_000);
afterAll(async () => {
  await sb.cleanup();
  await own.remove();
});

describe('a parked write that committed, sent again once its workspace is past its byte quota', () => {
  it('answers what it committed, not QUOTA_EXCEEDED, while a new parked write is refused', async () => {
    const admin = new Redis(own.url);
    const key = (await new MemberRegistry(admin, keysFor(sb.config.prefix)).add('acme', 'ada', 'admin')).key;
    admin.disconnect();
    const write = { ...gated, callId: 'P', tool: 'DATA_WRITE_SQL' as const, arguments: { sql: 'INSERT INTO t VALUES (?)', params: ['P'] } };
    const parked = (await client.call(write, { wait: false })) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');
    expect(await client.decide(parked.approval.id, { decision: 'approve', key, reason: 'ok' })).toMatchObject({ ok: true });
    expect(await client.result('P', { workspace: 'acme', agent: 'parked', wait: true })).toMatchObject({ ok: true, result: { changes: 1 } });

    // Past the quota: writes go through while the bytes before them are within it.
    let refused: unknown;
    for (let i = 0; i < 8 && !refused; i++) {
      const answer = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: fill } });
      if (!answer.ok) refused = answer;
    }
    expect(refused).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });

    await own.kill();
    own.wipe();
    await own.start();

    const again = await client.call(write, { wait: false });
    expect(again, `a committed write was not answered from its record: ${JSON.stringify(again)}`).toMatchObject({
      ok: true,
      callId: 'P',
      result: { changes: 1 },
    });
    const other = await client.call({ ...gated, callId: 'Q', tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO t VALUES ('Q')" } }, { wait: false });
    expect(other).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT id FROM t' } })).toMatchObject({
      ok: true,
      result: { rows: [['P']] },
    });
  }, 60_000);
});
