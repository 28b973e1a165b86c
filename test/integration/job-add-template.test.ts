import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobAdd, JobAddTemplate } from '../../src/calls/admitted-add.ts';
import { callJobOptions } from '../../src/calls/call-resend.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import type { CallJobData } from '../../src/contracts/call.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Issue 31: a call's add built from its queue's template (the keys and the packed options made
// once) must be BullMQ's add byte for byte, in its arguments and in the job hash it stores.
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
const data = (callId: string, sql = 'SELECT 1'): CallJobData => ({
  callId,
  workspace: 'tpl',
  agent: 'scout',
  settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
  plan: 'pro',
  tool: 'DATA_QUERY_SQL',
  arguments: { sql, params: ['é', 2] },
  enqueuedAt: 1_700_000_000_000,
});
const queue = (shard: number) => new Queue(keys().queueName(shard), { connection: redis, prefix: keys().bullPrefix });
const bytes = (x: Buffer | string) => (typeof x === 'string' ? Buffer.from(x) : x);

describe("a call's add from its queue's template", () => {
  it("builds BullMQ's keys and arguments byte for byte, for ids of every msgpack string length", async () => {
    const q = queue(0);
    const template = JobAddTemplate.of(q, 'call', callJobOptions('', 3600))!;
    expect(template).toBeDefined();
    const now = 1_700_000_000_456;
    for (const id of ['tpl:scout:a', 'tpl:scout:é€😀', `tpl:scout:${'x'.repeat(20)}`, `tpl:scout:${'y'.repeat(250)}`, `tpl:scout:${'z'.repeat(70_000)}`]) {
      const want = jobAdd(q, 'call', data(id), callJobOptions(id, 3600), now);
      const got = template.add(data(id), id, now);
      expect(got.keys).toEqual(want.keys);
      expect(got.dataJson).toBe(want.dataJson);
      expect(got.args.map(bytes)).toEqual(want.args.map(bytes));
    }
    // The ids BullMQ refuses, refused alike.
    for (const id of ['42', 'a:b']) expect(() => template.add(data(id), id)).toThrow(/Custom Id/);
    // Options a template does not take: BullMQ's own path.
    expect(JobAddTemplate.of(q, 'call', { ...callJobOptions('', 3600), priority: 2 })).toBeUndefined();
    await q.close();
  });

  it("stores the same job hash, byte for byte, as BullMQ's add built per call", async () => {
    const [a, b] = [queue(1), queue(2)];
    await Promise.all([a.waitUntilReady(), b.waitUntilReady()]);
    const budget = new WorkspaceRedisBudget(redis, keys(), 1024 * 1024);
    const id = 'tpl:scout:same-job';
    const now = Date.now();
    const entry = [{ callKey: id, kind: 'call' as const, bytes: 100, until: now + 60_000 }];
    expect(await budget.admitCall('tpl', 'pro', entry, [], now, jobAdd(a, 'call', data(id), callJobOptions(id, 3600), now))).toBeUndefined();
    const template = JobAddTemplate.of(b, 'call', callJobOptions('', 3600))!;
    expect(await budget.admitCall('tpl2', 'pro', entry, [], now, template.add(data(id), id, now))).toBeUndefined();
    const [ha, hb] = await Promise.all([redis.hgetallBuffer(a.toKey(id)), redis.hgetallBuffer(b.toKey(id))]);
    expect(Object.keys(ha).sort()).toEqual(Object.keys(hb).sort());
    for (const field of Object.keys(ha)) expect(hb[field]!.equals(ha[field]!), field).toBe(true);
    expect(ha.opts!.toString()).toContain(id);
    await Promise.all([a.close(), b.close()]);
  });
});
