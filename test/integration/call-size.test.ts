import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallJobData } from '../../src/contracts/call.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { callKey } from '../../src/contracts/call-identity.ts';

const MB = 1024 * 1024;

let sb: Sandbox;
let client: AgentDbClient;
let redis: Redis;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  redis = connectRedis(sb.config.redisUrl);
});
afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
});

const who = { workspace: 'sizes', agent: 'scout', settings: { database: 'agent' as const } };
const keys = () => keysFor(sb.config.prefix);
const shard = () => shardOf(databaseId(who.workspace, who.agent), sb.config.shardCount);

/** Query arguments whose JSON is exactly `bytes` long: one string param fills the rest. */
function argsOf(bytes: number): { sql: string; params: string[] } {
  const empty = { sql: 'SELECT length(?)', params: [''] };
  const fill = bytes - Buffer.byteLength(JSON.stringify(empty));
  const args = { sql: empty.sql, params: ['x'.repeat(fill)] };
  expect(Buffer.byteLength(JSON.stringify(args))).toBe(bytes);
  return args;
}

/** Every job any shard queue holds, in any state. */
async function jobsEverywhere(): Promise<number> {
  let total = 0;
  for (let s = 0; s < sb.config.shardCount; s++) {
    const queue = new Queue(keys().queueName(s), { connection: redis, prefix: keys().bullPrefix });
    const counts = await queue.getJobCounts();
    total += Object.values(counts).reduce((a, b) => a + b, 0);
    await queue.close();
  }
  return total;
}

async function jobKeyExists(callId: string): Promise<boolean> {
  for (let s = 0; s < sb.config.shardCount; s++) {
    if (await redis.exists(`${keys().bullPrefix}:${keys().queueName(s)}:${callKey(who.workspace, who.agent, callId)}`)) return true;
  }
  return false;
}

describe('MAX_CALL_BYTES', () => {
  it('is 1 MB by default', () => expect(sb.config.maxCallBytes).toBe(MB));

  it('refuses a 30 MB param in the client, with nothing put in Redis', async () => {
    const before = await jobsEverywhere();
    const callId = `big-${randomUUID()}`;
    const env = (await client.call({
      ...who,
      callId,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'INSERT INTO t VALUES (?)', params: ['x'.repeat(30 * MB)] },
    })) as Envelope;
    expect(env).toMatchObject({ ok: false, callId, tool: 'DATA_WRITE_SQL', error: { code: 'CALL_TOO_LARGE' } });
    expect(!env.ok && env.error.message).toMatch(/The arguments take 3145\d{4} bytes as JSON; a call may take at most 1048576/);
    expect(await jobKeyExists(callId)).toBe(false);
    expect(await jobsEverywhere()).toBe(before);
  });

  it('runs a call of exactly MAX_CALL_BYTES and refuses one byte more, before anything is enqueued', async () => {
    const fits = (await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: argsOf(MB) })) as Envelope;
    expect(fits).toMatchObject({ ok: true, result: { rows: [[MB - Buffer.byteLength(JSON.stringify({ sql: 'SELECT length(?)', params: [''] }))]] } });

    const before = await jobsEverywhere();
    const callId = `over-${randomUUID()}`;
    const over = (await client.call({ ...who, callId, tool: 'DATA_QUERY_SQL', arguments: argsOf(MB + 1) })) as Envelope;
    expect(over).toMatchObject({ ok: false, error: { code: 'CALL_TOO_LARGE', message: expect.stringContaining('The arguments take 1048577 bytes') } });
    expect(await jobKeyExists(callId)).toBe(false);
    expect(await jobsEverywhere()).toBe(before);
  });

  it('measures UTF-8 bytes, not characters', async () => {
    // 400,000 characters of three bytes each: 1.2 MB.
    const env = (await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: ['日'.repeat(400_000)] } })) as Envelope;
    expect(env).toMatchObject({ ok: false, error: { code: 'CALL_TOO_LARGE' } });
  });

  it('is enforced by the worker on a raw job that never went through the client', async () => {
    const callId = `raw-${randomUUID()}`;
    const data: CallJobData = {
      callId,
      ...who,
      settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
      tool: 'DATA_QUERY_SQL',
      arguments: argsOf(MB + 1),
      enqueuedAt: Date.now(),
    };
    const queue = new Queue(keys().queueName(shard()), { connection: redis, prefix: keys().bullPrefix });
    await queue.add('call', data, { jobId: callKey(who.workspace, who.agent, callId), removeOnComplete: { age: 3600 } });
    await queue.close();
    const env = (await client.result(callId, { ...who, wait: true })) as Envelope;
    expect(env).toMatchObject({ ok: false, callId, error: { code: 'CALL_TOO_LARGE', message: expect.stringContaining('1048577 bytes') } });
    // What the job keeps as its result is the short refusal, not a copy of the arguments.
    const stored = await redis.hget(`${keys().bullPrefix}:${keys().queueName(shard())}:${callKey(who.workspace, who.agent, callId)}`, 'returnvalue');
    expect(stored!.length).toBeLessThan(2048);
  });
});
