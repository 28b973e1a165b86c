import { randomUUID } from 'node:crypto';
import { type Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { callJobOptions } from '../../src/calls/call-resend.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { CallJobData } from '../../src/contracts/call.ts';
import { errorEnvelope, type Envelope } from '../../src/contracts/envelope.ts';
import { deleteKeys, REDIS_URL } from './harness.ts';

/**
 * A call queue of its own prefix on the test Redis (removed after the file's tests), for the
 * tests of a send that puts a refused call back to run (F12, F13): `refusedCall` leaves one
 * agent's write whose first run a worker answered STORAGE_FULL, and `runOnce` runs the next job
 * as a worker does with the envelope given.
 */
export function refusedCallQueue() {
  const prefix = `t-${randomUUID().slice(0, 12)}`;
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('calls-0', { connection, prefix });
  afterAll(async () => {
    await queue.close();
    connection.disconnect();
    await deleteKeys(prefix);
  });

  /** Runs the queue's next job with `answer`'s envelope, as a worker does; resolves once it is marked finished. */
  async function runOnce(answer: (job: Job<CallJobData>) => Envelope): Promise<void> {
    const own = connection.duplicate();
    const worker = new Worker<CallJobData, Envelope>('calls-0', async (job) => answer(job), { connection: own, prefix });
    await new Promise<void>((resolve) => worker.once('completed', () => resolve()));
    await worker.close();
    own.disconnect();
  }

  /** `INSERT INTO t VALUES (n)` by acme/scout under `callId`, its first run answered STORAGE_FULL. */
  async function refusedCall(callId: string, n = 1) {
    const who = { workspace: 'acme', agent: 'scout', callId };
    const key = callKey(who.workspace, who.agent, who.callId);
    const data = (enqueuedAt: number): CallJobData =>
      ({
        ...who,
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: `INSERT INTO t VALUES (${n})` },
        enqueuedAt,
        ownId: true,
      }) as CallJobData;
    const refusal = errorEnvelope(who.callId, 'DATA_WRITE_SQL', 'STORAGE_FULL', 'the disk is full');
    const ok: Envelope = { ok: true, callId: who.callId, tool: 'DATA_WRITE_SQL', credits: 1, untrusted: true, result: { changes: 1 } };
    await queue.add('call', data(1), callJobOptions(key, 600));
    await runOnce(() => refusal);
    return { who, key, data, refusal, ok };
  }

  return { queue, runOnce, refusedCall };
}
