import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { AgentDbError, codeOf } from '../../src/errors.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 38 (D6's find): a shard op that failed after its retries rejected with BullMQ's bare
// reason as a plain Error, so `agentdb restore` on a full disk at load 30 exited 1 with a stack
// trace ("job stalled more than allowable limit"). Its caller now gets a code: the op's own, or
// UNAVAILABLE saying it may have run when its workers lost it, or INTERNAL. Workers of the test's
// own stand in for the faults, on the shard's real queue.

const TAKER = fileURLToPath(new URL('../helpers/op-taker-child.mjs', import.meta.url));

let sb: Sandbox;
let ops: ShardOpClient;
const workers: { worker: Worker; conn: Redis }[] = [];

function workerOf(processor: () => Promise<unknown>, opts: { lockDuration?: number; stalledInterval?: number; maxStalledCount?: number } = {}): Worker {
  const keys = keysFor(sb.config.prefix);
  const conn = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const worker = new Worker(keys.queueName(0), processor, { connection: conn, prefix: keys.bullPrefix, ...opts });
  workers.push({ worker, conn });
  return worker;
}

beforeEach(() => {
  sb = sandbox();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
});
afterEach(async () => {
  await ops.close();
  for (const { worker, conn } of workers.splice(0)) {
    await worker.close(true);
    conn.disconnect();
  }
  await sb.cleanup();
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: unknown) => err as Error,
  );

it('an op that threw a coded error after its retries answers that code and detail', async () => {
  workerOf(async () => {
    throw new AgentDbError('STORAGE_FULL', 'the data folder has no room');
  });
  const err = await failure(ops.run(0, 'history.activity', { db: 'acme/scout' }, { db: 'acme/scout', timeoutMs: 20_000 }));
  // main: a plain Error, no code: the CLI printed its stack and exited 1.
  expect(codeOf(err)).toBe('STORAGE_FULL');
  expect(err?.message).toContain('the data folder has no room');
}, 30_000);

it('an op without a code is INTERNAL, its reason said', async () => {
  workerOf(async () => {
    throw new Error('the op broke');
  });
  const err = await failure(ops.run(0, 'history.activity', { db: 'acme/scout' }, { db: 'acme/scout', timeoutMs: 20_000 }));
  expect(codeOf(err)).toBe('INTERNAL');
  expect(err?.message).toContain('the op broke');
}, 30_000);

it('an op its workers lost while it ran is UNAVAILABLE and says it may have run', async () => {
  // A worker process takes the op and is SIGKILLed (its lock no longer renewed); another's stalled
  // check, allowing no stall, fails the job as BullMQ does after a worker's death.
  const keys = keysFor(sb.config.prefix);
  const taker = spawn(process.execPath, [TAKER, JSON.stringify({ redisUrl: REDIS_URL, queue: keys.queueName(0), prefix: keys.bullPrefix })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const taken = new Promise<void>((resolve) => taker.stdout.on('data', (d: Buffer) => d.toString().includes('taken') && resolve()));
  const answer = failure(ops.run(0, 'history.restoreInPlace', { db: 'acme/scout' }, { db: 'acme/scout', timeoutMs: 30_000 }));
  await taken;
  const gone = once(taker, 'exit');
  taker.kill('SIGKILL');
  await gone;
  workerOf(async () => undefined, { lockDuration: 1_000, stalledInterval: 500, maxStalledCount: 0 });
  const err = await answer;
  // main: a plain Error 'job stalled more than allowable limit', no code.
  expect(codeOf(err)).toBe('UNAVAILABLE');
  expect(err?.message).toMatch(/may have run/);
  expect(err?.message).toContain('agentdb history');
}, 40_000);
