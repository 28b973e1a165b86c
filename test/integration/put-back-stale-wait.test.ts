import { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { CallLookup } from '../../src/calls/call-lookup.ts';
import { addOrJoin } from '../../src/calls/call-resend.ts';
import { CallWaiters } from '../../src/calls/call-waiters.ts';
import { refusedCallQueue } from '../helpers/refused-call.ts';

// Session 34, F12. A send of a call whose job ended with a retryable refusal (STORAGE_FULL) puts
// the job back to run. Its wait is set before it looks at the job (so no completion is missed),
// and the run that ended may settle it in between: its announcement read then (a reader catching
// up after Redis came back), or any look at the finished job. That wait answered the refusal,
// "nothing was written", while the run put back committed. The send must wait for the run it
// put back; an announcement of the run before, read late, settles nothing.

const { queue, runOnce, refusedCall } = refusedCallQueue();

describe('a send that puts a refused call back to run', () => {
  it('waits for the run it put back, not the refusal of the run before', async () => {
    const { who, key, data, refusal, ok } = await refusedCall('w1');
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
    const { key, data } = await refusedCall('w2', 2);
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
