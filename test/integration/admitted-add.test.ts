import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { jobAdd, jobAddByJob } from '../../src/calls/admitted-add.ts';
import type { RateCounter } from '../../src/calls/call-rate-limits.ts';
import { callJobOptions } from '../../src/calls/call-resend.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import type { CallJobData } from '../../src/contracts/call.ts';
import { callKeyOf } from '../../src/contracts/call-identity.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Issue 31: a call with a generated id is admitted (rates, Redis budget) and added to its queue
// by one script. What the two steps guaranteed must hold: BullMQ's job as BullMQ's own add
// stores it, and a refused call adds nothing.
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
let sb: Sandbox;

beforeAll(() => {
  sb = sandbox();
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

const keys = () => keysFor(sb.config.prefix);
const callData = (workspace: string, callId: string): CallJobData => ({
  callId,
  workspace,
  agent: 'scout',
  settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
  plan: 'pro',
  tool: 'DATA_QUERY_SQL',
  arguments: { sql: 'SELECT 1', params: ['é', 2] },
  enqueuedAt: 1_700_000_000_000,
});
const queueOf = (workspace: string) =>
  new Queue(keys().queueName(shardOf(databaseId(workspace, 'scout'), sb.config.shardCount)), { connection: redis, prefix: keys().bullPrefix });
const entry = (callKey: string, bytes: number) => [{ callKey, kind: 'call' as const, bytes, until: Date.now() + 60_000 }];

describe('a call admitted and added in one script', () => {
  it("stores the job as BullMQ's own add does, and counts it against the budget", async () => {
    const queue = queueOf('same');
    const budget = new WorkspaceRedisBudget(redis, keys(), 1024 * 1024);
    const ours = callData('same', 'ours');
    const theirs = callData('same', 'theirs');
    const oursKey = callKeyOf(ours);
    const theirsKey = callKeyOf(theirs);
    await queue.waitUntilReady();
    const add = jobAdd(queue, 'call', ours, callJobOptions(oursKey, 3600));
    expect(add.dataJson).toBe(JSON.stringify(ours));
    expect(await budget.admitCall('same', 'pro', entry(oursKey, 100), [], Date.now(), add)).toBeUndefined();
    await queue.add('call', theirs, callJobOptions(theirsKey, 3600));

    const [a, b] = await Promise.all([queue.getJob(oursKey), queue.getJob(theirsKey)]);
    expect(a!.data).toEqual(ours);
    expect({ ...a!.opts, jobId: oursKey }).toEqual({ ...b!.opts, jobId: oursKey });
    expect(a!.name).toBe(b!.name);
    expect(await a!.getState()).toBe('waiting');
    const held = await redis.zrange(keys().redisBudget('same').ledger, 0, -1);
    expect(held).toEqual([`${oursKey}|call:100`]);
    await queue.close();
  });

  it("builds BullMQ's arguments byte for byte as BullMQ's own Job does, without one", async () => {
    const queue = queueOf('alike');
    const data = callData('alike', 'alike');
    const opts = callJobOptions(callKeyOf(data), 3600);
    const now = vi.spyOn(Date, 'now').mockReturnValue(1_700_000_000_123);
    try {
      const fast = jobAdd(queue, 'call', data, opts);
      expect(fast).toEqual(jobAddByJob(queue, 'call', data, opts));
      // Options beyond a call's plain ones go through the Job: a priority is not a standard add.
      expect(() => jobAdd(queue, 'call', data, { ...opts, priority: 3 })).toThrow(/not the standard add/);
      // The ids BullMQ refuses, refused alike.
      for (const jobId of ['42', 'a:b']) {
        expect(() => jobAddByJob(queue, 'call', data, { ...opts, jobId })).toThrow(/Custom Id/);
        expect(() => jobAdd(queue, 'call', data, { ...opts, jobId })).toThrow(/Custom Id/);
      }
    } finally {
      now.mockRestore();
      await queue.close();
    }
  });

  it('adds nothing when the budget refuses the call, nor when a rate counter does', async () => {
    const queue = queueOf('full');
    await queue.waitUntilReady();
    const budget = new WorkspaceRedisBudget(redis, keys(), 1000);
    await budget.note('full', entry('earlier', 1000));
    const refused = callData('full', 'over-budget');
    const refusedKey = callKeyOf(refused);
    const verdict = await budget.admitCall(
      'full',
      'pro',
      entry(refusedKey, 100),
      [],
      Date.now(),
      jobAdd(queue, 'call', refused, callJobOptions(refusedKey, 3600)),
    );
    expect(verdict).toMatchObject({ over: expect.stringContaining('workspace full holds 1000 bytes') });

    const counter: RateCounter = { of: 'key', key: `${sb.config.prefix}:{budget-full}:call-rate:key:test`, points: 10, limit: 10, windowS: 60 };
    const roomy = new WorkspaceRedisBudget(redis, keys(), 1024 * 1024);
    const first = callData('full', 'first-of-rate');
    const second = callData('full', 'past-rate');
    const add = (d: CallJobData) => jobAdd(queue, 'call', d, callJobOptions(callKeyOf(d), 3600));
    await redis.del(keys().redisBudget('full').ledger, keys().redisBudget('full').held);
    expect(await roomy.admitCall('full', 'pro', entry(callKeyOf(first), 10), [counter], Date.now(), add(first))).toBeUndefined();
    expect(await roomy.admitCall('full', 'pro', entry(callKeyOf(second), 10), [counter], Date.now(), add(second))).toMatchObject({ rate: counter });

    expect(await queue.getJob(refusedKey)).toBeUndefined();
    expect(await queue.getJob(callKeyOf(second))).toBeUndefined();
    expect(await queue.getWaitingCount()).toBe(1);
    expect((await redis.zrange(keys().redisBudget('full').ledger, 0, -1)).map((m) => m.split('|')[0])).toEqual([callKeyOf(first)]);
    await queue.close();
  });

  it('leaves a client no wait for a call refused in the script', async () => {
    const client = sb.client({ rateLimits: { windowS: 600, keyCalls: 1 } });
    const input = { workspace: 'waits', agent: 'scout', settings: { database: 'agent' as const }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } };
    // No worker runs here: the first call answers where it stands once its short wait is up.
    const queued = await client.call(input, { wait: false, timeoutMs: 50 });
    expect(queued).toMatchObject({ ok: false, status: 'queued' });
    const refused = await client.call(input);
    expect(refused).toMatchObject({ ok: false, error: { code: 'RATE_LIMITED' } });
    expect(client.waitCounts()).toEqual({ calls: 0, waits: 0, looks: 0 });
    const queue = queueOf('waits');
    expect(await queue.getJob(callKeyOf({ workspace: 'waits', agent: 'scout', callId: refused.callId }))).toBeUndefined();
    expect(await queue.getJob(callKeyOf({ workspace: 'waits', agent: 'scout', callId: queued.callId }))).toBeDefined();
    await queue.close();
  });
});

// Review R3: the script carries the call's arguments (up to MAX_CALL_BYTES), so a tenant over its
// budget made Redis receive and parse them for every call it refused. Once the client has seen
// the workspace full, its calls' notes go alone first. A Redis of the test's own: its count of
// bytes received is this test's alone.
describe('a call of a workspace seen holding its budget', () => {
  let own: OwnRedis;
  let admin: ReturnType<typeof connectRedis>;
  let sbOwn: Sandbox;
  beforeAll(async () => {
    own = await OwnRedis.start();
    admin = connectRedis(own.url);
    sbOwn = sandbox({ REDIS_URL: own.url });
  });
  afterAll(async () => {
    await sbOwn.cleanup();
    admin.disconnect();
    await own.remove();
  });
  const received = async () => Number(/total_net_input_bytes:(\d+)/.exec(await admin.info('stats'))![1]);

  it('sends Redis no arguments to refuse', async () => {
    const cap = 64 * 1024;
    const client = sbOwn.client({ redisBytesPerWorkspace: cap });
    await new WorkspaceRedisBudget(admin, keysFor(sbOwn.config.prefix), cap).note('over', entry('earlier', cap));
    const big = 'x'.repeat(256 * 1024);
    const input = {
      workspace: 'over',
      agent: 'scout',
      settings: { database: 'agent' as const },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT ?', params: [big] },
    };
    // Warmed up by another workspace's small call: the queue's setup and the event reader.
    expect(await client.call({ ...input, workspace: 'other', arguments: { sql: 'SELECT 1' } }, { wait: false, timeoutMs: 50 })).toMatchObject({
      status: 'queued',
    });
    const sentFor = async () => {
      const before = await received();
      expect(await client.call(input)).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
      return (await received()) - before;
    };
    // Not yet seen full: the arguments go inside the one script.
    expect(await sentFor()).toBeGreaterThan(big.length);
    // Seen full now: the note alone, a few hundred bytes with the commands around it.
    expect(await sentFor()).toBeLessThan(16 * 1024);
    expect(await sentFor()).toBeLessThan(16 * 1024);
    // Room back (its entries gone): admitted by the note alone, and its job added after it.
    await admin.del(keysFor(sbOwn.config.prefix).redisBudget('over').ledger, keysFor(sbOwn.config.prefix).redisBudget('over').held);
    expect(await client.call(input, { wait: false, timeoutMs: 50 })).toMatchObject({ status: 'queued' });
    const queue = new Queue(keysFor(sbOwn.config.prefix).queueName(shardOf(databaseId('over', 'scout'), sbOwn.config.shardCount)), {
      connection: admin,
      prefix: keysFor(sbOwn.config.prefix).bullPrefix,
    });
    expect(await queue.getWaitingCount()).toBe(1);
    await queue.close();
  });
});
