import { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { CallJobData } from '../../src/contracts/call.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { finishedEnvelope } from '../../src/calls/call-answers.ts';
import type { CallLookup } from '../../src/calls/call-lookup.ts';
import { addOrJoin } from '../../src/calls/call-resend.ts';
import { callResult } from '../../src/calls/call-result.ts';
import { CallWaiters } from '../../src/calls/call-waiters.ts';
import { refusedCallQueue } from '../helpers/refused-call.ts';

// Session 34, F13 (F12's open item). A lookup by id with `wait` reads the call's job finished with
// a retryable refusal (STORAGE_FULL); before it answers, a send of the same call puts the job back
// to run and waits anew. The lookup then handed that refusal to every wait on the call — the send's
// new wait too, answered "nothing was written" of the run it put back, which then committed. The
// lookup may answer what it read; the send must wait for the run it put back.

const { queue, runOnce, refusedCall } = refusedCallQueue();
// A finished job's envelope read late, as `CallLookup.late` gives it: a refusal, which no restore's
// note (`taken-back.ts`) changes.
const late = async (job: Job<CallJobData, Envelope>) => finishedEnvelope(job);

describe('a lookup that read a refused call finished before a send put it back', () => {
  it('answers its own caller, not the wait of the send that put the job back', async () => {
    const { who, key, data, ok } = await refusedCall('l1');

    // The pause point: the lookup's read of the job goes to Redis, and its answer is held here
    // until the send has put the job back (one Redis round trip, made as wide as the test needs).
    let read!: () => void;
    const wasRead = new Promise<void>((r) => (read = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const lookup = {
      async find(k: string) {
        const job = await Job.fromId<CallJobData, Envelope>(queue, k);
        read();
        await released;
        return job ? { job, queue } : undefined;
      },
      late,
    } as unknown as CallLookup;
    const waiters = new CallWaiters();
    const byId = callResult({ waiters, lookup, ensureReader: async () => undefined }, who.callId, { ...who, wait: true });
    await wasRead;

    const completion = waiters.completion(key);
    const send = { queue, key, data: data(2), resultTtlS: 600, ownId: true, wait: true, completion, entryBytes: 0, letGo: async () => undefined };
    expect(await addOrJoin(waiters, lookup, send)).toBeUndefined();
    expect(await queue.getJobState(key)).toBe('waiting');

    release();
    // The lookup read the refusal before the job was put back: that is its answer.
    expect(await byId).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
    const answered = Promise.race([send.completion, new Promise((r) => setImmediate(() => r('pending')))]);
    expect(await answered).toBe('pending');
    // The lookup's own wait is gone with its answer; the send's waits on.
    expect(waiters.counts()).toMatchObject({ calls: 1, waits: 1 });

    await runOnce(() => ok);
    const finished = (await Job.fromId(queue, key))!.finishedOn!;
    waiters.onEvent({ id: `${finished}-0`, type: 'call.completed', ...who, ok: true, envelope: ok, at: finished } as never, async () => undefined);
    expect(await send.completion).toEqual(ok);
  });

  it('nor, read while the job was being put back, the wait of that send', async () => {
    const { who, key, data } = await refusedCall('l2', 2);
    // What a read Redis answered before the send's put-back ran there: the run before's end.
    const before = (await Job.fromId<CallJobData, Envelope>(queue, key))!;
    const lookup = { find: async () => ({ job: before, queue }), late } as unknown as CallLookup;
    const waiters = new CallWaiters();
    // The pause point: the lookup begins once the send has started to put the job back, and
    // answers (all in this process's turn) before Redis has answered the put-back.
    let byId: Promise<unknown> | undefined;
    const putBack = waiters.putBack.bind(waiters);
    waiters.putBack = (k: string, endedAt: number) => {
      const done = putBack(k, endedAt);
      byId ??= callResult({ waiters, lookup, ensureReader: async () => undefined }, who.callId, { ...who, wait: true });
      return done;
    };
    const completion = waiters.completion(key);
    const send = { queue, key, data: data(2), resultTtlS: 600, ownId: true, wait: true, completion, entryBytes: 0, letGo: async () => undefined };
    expect(await addOrJoin(waiters, lookup, send)).toBeUndefined();
    expect(await byId).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
    const answered = Promise.race([send.completion, new Promise((r) => setImmediate(() => r('pending')))]);
    expect(await answered).toBe('pending');
    expect(await queue.getJobState(key)).toBe('waiting');
    waiters.drop(send.completion);
  });
});
