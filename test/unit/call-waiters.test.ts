import { describe, expect, it, vi } from 'vitest';
import { CallWaiters, WaitEnded } from '../../src/calls/call-waiters.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { callKey } from '../../src/contracts/call-identity.ts';

// One watch per call, shared by its waits, with one look at the job; it goes with its last wait.

const env = (callId: string): Envelope => ({ ok: true, callId, tool: 'DATA_QUERY_SQL', credits: 1, untrusted: true, result: {} });
const never = () => new Promise<Envelope | undefined>(() => undefined);

describe('CallWaiters', () => {
  it('shares one watch and one look among the waits on a call, and drops both with the last abort', async () => {
    const w = new CallWaiters();
    const aborts = Array.from({ length: 3 }, () => new AbortController());
    const waits = aborts.map((a) => w.completion('k1', a.signal));
    for (let i = 0; i < 3; i++) w.lookEvery('k1', 60_000, never);
    expect(w.counts()).toEqual({ calls: 1, waits: 3, looks: 1 });
    aborts[0]!.abort(new Error('gone'));
    await expect(waits[0]).rejects.toThrow('gone');
    expect(w.counts()).toEqual({ calls: 1, waits: 2, looks: 1 });
    aborts[1]!.abort();
    aborts[2]!.abort();
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
    // A new wait starts afresh, and the completion reaches it.
    const again = w.completion('k1');
    w.complete('k1', env('c1'));
    expect(await again).toMatchObject({ callId: 'c1' });
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('refuses a wait whose signal has already aborted, registering nothing', async () => {
    const w = new CallWaiters();
    const a = new AbortController();
    a.abort(new Error('before'));
    await expect(w.completion('k2', a.signal)).rejects.toThrow('before');
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('leaves no unhandled rejection for a wait refused at once that its waiter never awaits', async () => {
    // A call's enqueue asks for its waits before it adds the job; a client gone by then may never
    // await them (ten unhandled rejections failed a CI run).
    const unhandled: unknown[] = [];
    const note = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', note);
    try {
      const w = new CallWaiters();
      const a = new AbortController();
      a.abort(new Error('gone before the wait'));
      w.completion('k3', a.signal);
      w.parking('k3', a.signal);
      // Unhandled rejections are reported after the microtasks of the turn: two turns on.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', note);
    }
  });

  it('keeps the watch while a parking wait remains, without its look', () => {
    const w = new CallWaiters();
    const a = new AbortController();
    void w.completion('k3', a.signal);
    void w.parking('k3');
    w.lookEvery('k3', 60_000, never);
    expect(w.counts()).toEqual({ calls: 1, waits: 2, looks: 1 });
    a.abort();
    expect(w.counts()).toEqual({ calls: 1, waits: 1, looks: 0 });
  });

  it('completes every wait from the shared look, once', async () => {
    const w = new CallWaiters();
    let looks = 0;
    const waits = [w.completion('k4'), w.completion('k4')];
    w.lookEvery('k4', 1, async () => (++looks === 2 ? env('c4') : undefined));
    expect(await Promise.all(waits)).toEqual([env('c4'), env('c4')]);
    expect(looks).toBe(2);
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('looks now, for every watched call, when told Redis is back, and keeps one look scheduled', async () => {
    const w = new CallWaiters();
    const looked: string[] = [];
    const a = w.completion('ka');
    const b = w.completion('kb');
    w.lookEvery('ka', 60_000, async () => (looked.push('ka'), env('ca')));
    w.lookEvery('kb', 60_000, async () => (looked.push('kb'), undefined));
    w.lookNow();
    expect(await a).toEqual(env('ca'));
    await Promise.resolve();
    expect(looked).toEqual(['ka', 'kb']);
    expect(w.counts()).toEqual({ calls: 1, waits: 1, looks: 1 });
    w.drop(b);
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('looks once more right after a look that was under way when Redis came back, not in parallel with it', async () => {
    const w = new CallWaiters();
    const answers: ((e: Envelope | undefined) => void)[] = [];
    const wait = w.completion('kc');
    w.lookEvery('kc', 1, () => new Promise((resolve) => answers.push(resolve)));
    await vi.waitFor(() => expect(answers).toHaveLength(1));
    w.lookNow();
    w.lookNow();
    expect(answers).toHaveLength(1);
    // The look sent on the old connection fails; the one asked for follows at once.
    answers[0]!(undefined);
    await Promise.resolve();
    expect(answers).toHaveLength(2);
    answers[1]!(env('cc'));
    expect(await wait).toEqual(env('cc'));
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('keeps a worker-announced outcome of a waited call for a few seconds, for a result asked before BullMQ marks the job finished', async () => {
    vi.useFakeTimers();
    try {
      const w = new CallWaiters();
      const key = callKey('acme', 'scout', 'c9');
      const wait = w.completion(key);
      const event = { id: '1-0', type: 'call.completed' as const, callId: 'c9', workspace: 'acme', agent: 'scout', ok: true, envelope: env('c9'), at: 0 };
      w.onEvent(event, async () => undefined);
      expect(await wait).toEqual(env('c9'));
      expect(w.justAnnounced(key, 0)).toEqual(env('c9'));
      // Not of the job's run now: one taken after it announced (put back to run again), or none yet.
      expect(w.justAnnounced(key, 1)).toBeUndefined();
      expect(w.justAnnounced(key, undefined)).toBeUndefined();
      // Nobody waited on this one: nothing kept.
      w.onEvent({ ...event, callId: 'c10', envelope: env('c10') }, async () => undefined);
      expect(w.justAnnounced(callKey('acme', 'scout', 'c10'), 0)).toBeUndefined();
      vi.advanceTimersByTime(5001);
      expect(w.justAnnounced(key, 0)).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it('drops the waits it is given alone, stops listening to their signals, and ignores one settled or dropped before', async () => {
    const w = new CallWaiters();
    const a = new AbortController();
    const dropped = w.completion('k7', a.signal);
    const kept = w.completion('k7');
    const parked = w.parking('k7');
    expect(w.counts()).toEqual({ calls: 1, waits: 3, looks: 0 });
    w.drop(dropped, undefined, parked);
    expect(w.counts()).toEqual({ calls: 1, waits: 1, looks: 0 });
    // Its signal no longer reaches it: aborted now, it neither rejects nor touches the others.
    a.abort(new Error('late'));
    w.drop(dropped);
    expect(w.counts()).toEqual({ calls: 1, waits: 1, looks: 0 });
    w.complete('k7', env('c7'));
    expect(await kept).toMatchObject({ callId: 'c7' });
    w.drop(kept);
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
    // A new wait on the key is not dropped by an old promise dropped again.
    const fresh = w.completion('k7');
    w.drop(kept, dropped);
    expect(w.counts()).toEqual({ calls: 1, waits: 1, looks: 0 });
    w.complete('k7', env('c8'));
    expect(await fresh).toMatchObject({ callId: 'c8' });
    let settled = false;
    void dropped.then(
      () => (settled = true),
      () => (settled = true),
    );
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
  });

  it('ends every wait when the client closes', async () => {
    const w = new CallWaiters();
    const waits = [w.completion('k5'), w.parking('k6')];
    w.lookEvery('k5', 60_000, never);
    w.close(new WaitEnded('closed'));
    for (const wait of waits) await expect(wait).rejects.toThrow('closed');
    expect(w.counts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('answers no wait with what a look found if the job was put back to run while it looked, and looks again', async () => {
    // Session 34, F13: the shared look read the run before's refusal just before a send put the
    // job back; handed to the send's wait, it answered "nothing was written" of the run put back.
    const w = new CallWaiters();
    const sent = w.completion('k9');
    let found!: (e: Envelope) => void;
    let looks = 0;
    w.lookEvery('k9', 60_000, () => {
      looks++;
      return new Promise<Envelope>((r) => (found = r));
    });
    w.lookNow();
    expect(looks).toBe(1);
    w.putBack('k9', 1);
    found(env('c9'));
    const answered = await Promise.race([sent, new Promise((r) => setImmediate(() => r('pending')))]);
    expect(answered).toBe('pending');
    // Its look goes on, for the run put back.
    expect(w.counts()).toEqual({ calls: 1, waits: 1, looks: 1 });
    w.complete('k9', env('c10'));
    expect(await sent).toMatchObject({ callId: 'c10' });
  });
});
