import { randomUUID } from 'node:crypto';
import { Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { CallJobData } from '../../src/contracts/call.ts';
import { errorEnvelope, type Envelope } from '../../src/contracts/envelope.ts';
import type { CallLookup } from '../../src/calls/call-lookup.ts';
import { addOrJoin, callJobOptions } from '../../src/calls/call-resend.ts';
import { CallWaiters } from '../../src/calls/call-waiters.ts';
import { deleteKeys, REDIS_URL } from '../helpers/harness.ts';

// Session 34, F12. A send of a call whose job ended with a retryable refusal (STORAGE_FULL) puts
// the job back to run. Its wait is set before it looks at the job (so no completion is missed),
// and the run that ended may settle it in between: its announcement read then (a reader catching
// up after Redis came back), or any look at the finished job. That wait answered the refusal,
// "nothing was written", while the run put back committed. The send must wait for the run it
// put back; an announcement of the run before, read late, settles nothing.

const prefix = `t-${randomUUID().slice(0, 12)}`;
const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
const queue = new Queue('calls-0', { connection, prefix });

afterAll(async () => {
  await queue.close();
  connection.disconnect();
  await deleteKeys(prefix);
});

/** Runs the queue's next job with `answer` as its envelope, as a worker does; resolves once it is marked finished. */
async function runOnce(answer: (job: Job<CallJobData>) => Envelope): Promise<void> {
  const own = connection.duplicate();
  const worker = new Worker<CallJobData, Envelope>('calls-0', async (job) => answer(job), { connection: own, prefix });
  await new Promise<void>((resolve) => worker.once('completed', () => resolve()));
  await worker.close();
  own.disconnect();
}

describe('a send that puts a refused call back to run', () => {
  it('waits for the run it put back, not the refusal of the run before', async () => {
    const who = { workspace: 'acme', agent: 'scout', callId: 'w1' };
    const key = callKey(who.workspace, who.agent, who.callId);
    const data = (enqueuedAt: number): CallJobData =>
      ({
        ...who,
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'INSERT INTO t VALUES (1)' },
        enqueuedAt,
        ownId: true,
      }) as CallJobData;
    const refusal = errorEnvelope(who.callId, 'DATA_WRITE_SQL', 'STORAGE_FULL', 'the disk is full');
    const ok: Envelope = { ok: true, callId: who.callId, tool: 'DATA_WRITE_SQL', credits: 1, untrusted: true, result: { changes: 1 } };

    await queue.add('call', data(1), callJobOptions(key, 600));
    await runOnce(() => refusal);
    const ended = (await Job.fromId(queue, key))!.finishedOn!;
    const announced = (at: number, envelope: Envelope) =>
      ({
        id: `${at}-0`,
        type: 'call.completed' as const,
        workspace: who.workspace,
        agent: who.agent,
        callId: who.callId,
        ok: envelope.ok,
        envelope,
        at,
      }) as const;

    const waiters = new CallWaiters();
    const completion = waiters.completion(key);
    // The refused run's announcement, read after this send began to wait, before it looked.
    waiters.onEvent(announced(ended - 1, refusal), async () => undefined);
    const send = { queue, key, data: data(2), resultTtlS: 600, ownId: true, wait: true, completion, entryBytes: 0, letGo: async () => undefined };
    expect(await addOrJoin(waiters, {} as CallLookup, send)).toBeUndefined();
    expect(await queue.getJobState(key)).toBe('waiting');
    // Read again, later still: not the run waited for.
    waiters.onEvent(announced(ended, refusal), async () => undefined);
    const answered = Promise.race([send.completion, new Promise((r) => setImmediate(() => r('pending')))]);
    expect(await answered).toBe('pending');
    await runOnce(() => ok);
    waiters.onEvent(announced((await Job.fromId(queue, key))!.finishedOn!, ok), async () => undefined);
    expect(await send.completion).toEqual(ok);
  });

  it('puts nothing back for a send answered already ("may still run") whose commands ran once Redis was back', async () => {
    const who = { workspace: 'acme', agent: 'scout', callId: 'w2' };
    const key = callKey(who.workspace, who.agent, who.callId);
    const data = (enqueuedAt: number): CallJobData =>
      ({
        ...who,
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'INSERT INTO t VALUES (2)' },
        enqueuedAt,
        ownId: true,
      }) as CallJobData;
    await queue.add('call', data(1), callJobOptions(key, 600));
    await runOnce(() => errorEnvelope(who.callId, 'DATA_WRITE_SQL', 'STORAGE_FULL', 'the disk is full'));
    // A later send of the id may have been answered this refusal since: a run put back now
    // would commit under its "nothing was written".
    const waiters = new CallWaiters();
    const completion = waiters.completion(key);
    const late = {
      queue,
      key,
      data: data(2),
      resultTtlS: 600,
      ownId: true,
      wait: true,
      completion,
      answered: () => true,
      entryBytes: 0,
      letGo: async () => undefined,
    };
    await addOrJoin(waiters, {} as CallLookup, late);
    expect(await queue.getJobState(key)).toBe('completed');
  });
});
