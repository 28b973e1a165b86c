import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { opJobsLeft } from '../helpers/shard-op-jobs.ts';

// Session 36, T16 (T14's leftover): a shard op's job that failed for good (an error without a
// code, its attempts spent) was kept an hour (`removeOnFail`), its arguments and the error's
// stack in Redis in no workspace's budget, though its one caller had been told. The caller now
// removes it, as it removes a completed one. No adapter is known to let a tenant fail an op at
// will (each validates its arguments, and a coded error is an outcome): a worker that throws
// stands in for the fault here, on the shard's real queue.

let sb: Sandbox;
let redis: Redis;
let ops: ShardOpClient;
let worker: Worker;
let workerConn: Redis;

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  const keys = keysFor(sb.config.prefix);
  workerConn = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  worker = new Worker(
    keys.queueName(0),
    async (): Promise<unknown> => {
      throw new Error('the op broke');
    },
    { connection: workerConn, prefix: keys.bullPrefix },
  );
  await worker.waitUntilReady();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
});
afterAll(async () => {
  await ops.close();
  await worker.close();
  workerConn.disconnect();
  await redis.quit();
  await sb.cleanup();
});

it("a shard op's job that failed for good goes once its caller is told", async () => {
  await expect(ops.run(0, 'history.activity', { db: 'acme/scout' }, { db: 'acme/scout', timeoutMs: 20_000 })).rejects.toThrow('the op broke');
  // main: 1, kept an hour.
  expect(await opJobsLeft(redis, sb.config.prefix)).toBe(0);
}, 30_000);
