import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 29 (hostile review T6): a call refused IDEMPOTENCY_CONFLICT lets its budget entry go
// when the id's first call is not under way (F4). The entry is the member `<key>|call:<bytes>`,
// so a refused call of the same size as the first (`SELECT 2` against `SELECT 1`) names the
// first call's own entry. The first call was taken as not under way when its job was not found,
// which is also the moment between its claim of the id and its add: two sends at once under one
// id left the one that was queued uncounted (17 of 50 pairs, docs/benchmarks.md), so a tenant held Redis past its
// budget with every call it sent twice. No worker runs here: a call sent without waiting stays
// queued, under way, for the whole test.

const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const who = (workspace: string) => ({ workspace, agent: 'scout', settings: { database: 'agent' as const } });
const query = (workspace: string, callId: string, sql: string) => ({ ...who(workspace), tool: 'DATA_QUERY_SQL' as const, callId, arguments: { sql } });
const queued = { wait: false, timeoutMs: 100 };
afterAll(() => redis.disconnect());

describe('a call refused IDEMPOTENCY_CONFLICT while the first call under its id is on its way', () => {
  let sb: Sandbox;
  let clients: AgentDbClient[];
  beforeAll(() => {
    sb = sandbox();
    clients = [sb.client(), sb.client()];
  });
  afterAll(async () => await sb.cleanup());
  const entries = async (workspace: string) =>
    (await redis.zrange(keysFor(sb.config.prefix).redisBudget(workspace).ledger, 0, -1)).filter((m) => m.includes('|call:')).length;

  it("counts a caller's own id's claim for as long as the claim lives", async () => {
    // The claim stays RESULT_TTL_HOURS + APPROVAL_TTL_MS + a day; the call's `done` entry goes
    // RESULT_TTL_HOURS after it finished: 216 bytes a call past its budget for two days.
    const keys = keysFor(sb.config.prefix);
    expect(await clients[0]!.call(query('claims', 'k1', 'SELECT 1'), queued)).toMatchObject({ status: 'queued' });
    const ledger = await redis.zrange(keys.redisBudget('claims').ledger, 0, -1, 'WITHSCORES');
    const at = ledger.findIndex((m) => m.includes('|claim:'));
    expect(at).toBeGreaterThanOrEqual(0);
    expect(Number(ledger[at + 1])).toBeGreaterThanOrEqual(Date.now() + (await redis.pttl(keys.callIdClaim('claims.scout.k1'))));
  });

  it('leaves the first call counted between its claim of the id and its add', async () => {
    const keys = keysFor(sb.config.prefix);
    const queue = new Queue(keys.queueName(shardOf(databaseId('staged', 'scout'), sb.config.shardCount)), { connection: redis, prefix: keys.bullPrefix });
    try {
      expect(await clients[0]!.call(query('staged', 'c1', 'SELECT 1'), queued)).toMatchObject({ status: 'queued' });
      expect(await entries('staged')).toBe(1);
      // Its job taken out again: the id claimed and its entry counted, no job yet, as a first
      // call is just before its add.
      await queue.remove('staged.scout.c1');
      expect(await clients[1]!.call(query('staged', 'c1', 'SELECT 2'), queued)).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
      expect(await entries('staged')).toBe(1);
      // Nor the id's claim, which the refused call's admission named too.
      expect((await redis.zrange(keys.redisBudget('staged').ledger, 0, -1)).filter((m) => m.includes('|claim:'))).toHaveLength(1);
    } finally {
      await queue.close();
    }
  });
});

describe('a call refused IDEMPOTENCY_CONFLICT under an id whose call ended with a "try again"', () => {
  let sb: Sandbox;
  let client: AgentDbClient;
  beforeAll(async () => {
    sb = sandbox({ WORKSPACE_MAX_BYTES: String(256 * 1024) });
    // Its verdict on the disk quota not kept: the resend below is weighed again.
    await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
    client = sb.client();
  });
  afterAll(async () => await sb.cleanup());

  it('leaves the entry a resend of that call puts back to run shares, which its worker then lets go', async () => {
    const ledger = keysFor(sb.config.prefix).redisBudget('full').ledger;
    const entries = async () => (await redis.zrange(ledger, 0, -1)).filter((m) => m.includes('|call:')).length;
    const fill = 'CREATE TABLE big AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT randomblob(10000) AS b FROM c';
    // Another agent of the workspace takes it past its byte quota.
    const filler = { ...who('full'), agent: 'filler' };
    expect(await client.call({ ...filler, tool: 'DATA_WRITE_SQL', arguments: { sql: fill } })).toMatchObject({ ok: true });
    const write = (sql: string) => ({ ...who('full'), tool: 'DATA_WRITE_SQL' as const, callId: 'q1', arguments: { sql } });
    // Past the disk quota: an outcome the same write sent again runs again, once room is back.
    expect(await client.call(write('CREATE TABLE t1 (x)'))).toMatchObject({ error: { code: 'QUOTA_EXCEEDED' } });
    expect(await entries()).toBe(0);
    // Of the same size, so its entry is the member that write's resend counts: sent at once, the
    // resend puts the job back to run after this call found it finished, and this call's let-go
    // took the resend's count away while it ran.
    expect(await client.call(write('CREATE TABLE t2 (x)'))).toMatchObject({ error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await entries()).toBe(1);
    expect(await client.call(write('CREATE TABLE t1 (x)'))).toMatchObject({ error: { code: 'QUOTA_EXCEEDED' } });
    expect(await entries()).toBe(0);
  });
});
