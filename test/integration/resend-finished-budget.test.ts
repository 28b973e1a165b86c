import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { callKeyOf } from '../../src/contracts/call-identity.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 29 (F4): a call sent again under its id after it finished is counted against its
// workspace's Redis budget before it finds the first call's outcome. The fault ledger's resend of
// every acknowledged write (4,507 of them) was answered QUOTA_EXCEEDED, "nothing was stored,
// created or run", from the 1,889th on, for writes that had committed: (1) each resend put back
// the 128 KiB the client reserves for a call's envelope, which only the worker completing the
// call lets go (since P4, inside the call's one `call` entry), and a finished call is never
// completed again, so it stayed for days; (2) with the
// budget used up, the replay of a finished call, which stores nothing, was refused before it
// looked.

const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const who = (workspace: string) => ({ workspace, agent: 'scout', settings: { database: 'agent' as const } });
const write = (workspace: string, callId: string, sql: string) => ({ ...who(workspace), tool: 'DATA_WRITE_SQL' as const, callId, arguments: { sql } });
afterAll(() => redis.disconnect());

describe('a finished call sent again under its id', () => {
  let sb: Sandbox;
  let client: AgentDbClient;
  beforeAll(async () => {
    sb = sandbox();
    await sb.pool();
    client = sb.client();
  });
  afterAll(async () => await sb.cleanup());

  it("leaves no room reserved for an envelope in its workspace's budget", async () => {
    const ledger = keysFor(sb.config.prefix).redisBudget('resent').ledger;
    const reserved = async () => (await redis.zrange(ledger, 0, -1)).filter((m) => m.includes('|call:')).length;
    expect(await client.call(write('resent', 'mk', 'CREATE TABLE t (x)'))).toMatchObject({ ok: true });
    for (let i = 0; i < 5; i++) expect(await client.call(write('resent', `w${i}`, `INSERT INTO t VALUES (${i})`))).toMatchObject({ ok: true });
    // The worker swapped each call's entry (arguments and reserved room) for its `done` entry as it
    // completed it, before its answer: no `call` entry is left.
    expect(await reserved()).toBe(0);
    const held = Number(await redis.get(keysFor(sb.config.prefix).redisBudget('resent').held));
    for (let i = 0; i < 5; i++) expect(await client.call(write('resent', `w${i}`, `INSERT INTO t VALUES (${i})`))).toMatchObject({ ok: true });
    expect(await reserved()).toBe(0);
    expect(Number(await redis.get(keysFor(sb.config.prefix).redisBudget('resent').held))).toBeLessThanOrEqual(held);
  });

  it('refused IDEMPOTENCY_CONFLICT for another database, leaves no room reserved either', async () => {
    // The shared database and the agent's own on different shards: the id's claim refuses it.
    const ws = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7'].find((w) => shardOf(databaseId(w), 4) !== shardOf(databaseId(w, 'scout'), 4))!;
    const ledger = keysFor(sb.config.prefix).redisBudget(ws).ledger;
    const reserved = async () => (await redis.zrange(ledger, 0, -1)).filter((m) => m.includes('|call:')).length;
    const as = (scope?: 'workspace') => ({
      ...write(ws, 'x1', 'CREATE TABLE t (x)'),
      settings: { database: 'workspace', sharedData: true } as const,
      arguments: { sql: 'CREATE TABLE t (x)', ...(scope ? { scope } : {}) },
    });
    expect(await client.call(as())).toMatchObject({ ok: true });
    expect(await reserved()).toBe(0);
    for (let i = 0; i < 2; i++) expect(await client.call(as('workspace'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await reserved()).toBe(0);
  });
});

describe('another call under the id of a call still waiting for a person', () => {
  let sb: Sandbox;
  let client: AgentDbClient;
  beforeAll(async () => {
    sb = sandbox();
    await sb.pool();
    client = sb.client();
  });
  afterAll(async () => await sb.cleanup());

  // Review R1 (session 29): since a call's budget entry is one member (`<key>|call:<bytes>`,
  // arguments and envelope room together), two calls under one id share it only when their data
  // come to the same bytes. The let-go decided by whether the first call was known under way.
  const gated = (workspace: string) => ({ workspace, agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } });
  const entries = async (workspace: string) =>
    (await redis.zrange(keysFor(sb.config.prefix).redisBudget(workspace).ledger, 0, -1)).filter((m) => m.includes('|call:'));

  it("refused IDEMPOTENCY_CONFLICT with data of other bytes, leaves only the waiting call's entry", async () => {
    const first = await client.call({ ...gated('parked'), tool: 'DATA_WRITE_SQL', callId: 'p1', arguments: { sql: 'CREATE TABLE t (x)' } }, { wait: false });
    expect(first).toMatchObject({ status: 'awaiting_approval' });
    expect(await entries('parked')).toHaveLength(1);
    const other = `CREATE TABLE t (x, ${'y'.repeat(400)})`;
    for (let i = 0; i < 3; i++) {
      const env = await client.call({ ...gated('parked'), tool: 'DATA_WRITE_SQL', callId: 'p1', arguments: { sql: other } }, { wait: false });
      expect(env).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    }
    // On the code before: 2 (the refused call's 128 KiB and more held for days, as the first waits).
    expect(await entries('parked')).toHaveLength(1);
  });

  it("refused while the first call's job is not to be found (sent at the same moment), keeps the entry the two share", async () => {
    const first = await client.call({ ...gated('shared'), tool: 'DATA_WRITE_SQL', callId: 's1', arguments: { sql: 'CREATE TABLE t (x)' } }, { wait: false });
    expect(first).toMatchObject({ status: 'awaiting_approval' });
    const [entry] = await entries('shared');
    expect(entry).toBeDefined();
    // As a call sent at the same moment finds it: the id claimed, its job not added yet. The
    // claim is made to point at no queue, so the first call's job is not found.
    const claimKey = keysFor(sb.config.prefix).callIdClaim(callKeyOf({ workspace: 'shared', agent: 'scout', callId: 's1' }));
    const claim = JSON.parse((await redis.get(claimKey))!);
    await redis.set(claimKey, JSON.stringify({ ...claim, shard: 10_000 }), 'KEEPTTL');
    // Other SQL of the same length: the same bytes, so the same member.
    const env = await client.call({ ...gated('shared'), tool: 'DATA_WRITE_SQL', callId: 's1', arguments: { sql: 'CREATE TABLE u (x)' } }, { wait: false });
    expect(env).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    // On the code before: gone, and the waiting call counted for nothing.
    expect(await entries('shared')).toEqual([entry]);
  });
});

describe('a finished write sent again under its id while its workspace holds its Redis budget', () => {
  let sb: Sandbox;
  let client: AgentDbClient;
  beforeAll(async () => {
    sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(256 * 1024) });
    await sb.pool();
    client = sb.client();
  });
  afterAll(async () => await sb.cleanup());

  it('answers the write it committed, not QUOTA_EXCEEDED', async () => {
    expect(await client.call(write('held', 'mk', 'CREATE TABLE t (x)'))).toMatchObject({ ok: true });
    const first = (await client.call(write('held', 'w1', 'INSERT INTO t VALUES (1)'))) as Envelope;
    expect(first).toMatchObject({ ok: true, result: { lastInsertRowid: 1 } });
    // Reads of ~40 KB results (kept twice) until the budget refuses a new call.
    const big = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT i, printf('%.1000c','x') AS s FROM c";
    let refused: Envelope | undefined;
    for (let i = 0; i < 20 && !refused; i++) {
      const env = (await client.call({ ...who('held'), tool: 'DATA_QUERY_SQL', arguments: { sql: big, max_rows: 100 } })) as Envelope;
      if (!env.ok) refused = env;
    }
    expect(refused).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    // A new write is refused; the one that committed answers its outcome, as often as it is sent.
    expect(await client.call(write('held', 'w2', 'INSERT INTO t VALUES (2)'))).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    for (let i = 0; i < 2; i++) expect(await client.call(write('held', 'w1', 'INSERT INTO t VALUES (1)'))).toEqual(first);
  });

  it('answers where a call still waiting for a person stands, not QUOTA_EXCEEDED', async () => {
    const gated = { workspace: 'held-parked', agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };
    const parked = { ...gated, tool: 'DATA_WRITE_SQL' as const, callId: 'p1', arguments: { sql: 'CREATE TABLE t (x)' } };
    expect(await client.call(parked, { wait: false })).toMatchObject({ status: 'awaiting_approval' });
    const big = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT i, printf('%.1000c','x') AS s FROM c";
    let refused: Envelope | undefined;
    for (let i = 0; i < 20 && !refused; i++) {
      const env = (await client.call({ ...gated, tool: 'DATA_QUERY_SQL', arguments: { sql: big, max_rows: 100 } })) as Envelope;
      if (!env.ok) refused = env;
    }
    expect(refused).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    // On the code before: QUOTA_EXCEEDED, "nothing was stored, created or run", for a call that
    // waits for a person and runs once approved (review R1).
    expect(await client.call(parked, { wait: false })).toMatchObject({ callId: 'p1', status: 'awaiting_approval' });
  });
});
