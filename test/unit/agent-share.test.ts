import type { Job } from 'bullmq';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AgentShare, YOUNG_MS } from '../../src/calls/agent-share.ts';
import type { CallJobData } from '../../src/contracts/call.ts';

/** A job as AgentShare reads it: its id and whose call it is; a put-back call is recorded. */
function job(id: string, putBack: string[]): Job<CallJobData> {
  return {
    id,
    data: { workspace: 'w', agent: 'a' },
    moveToDelayed: async () => {
      putBack.push(id);
    },
    promote: async () => undefined,
  } as unknown as Job<CallJobData>;
}

/**
 * The timers the share has armed, one per agent at most. Not `vi.getTimerCount()`: the suite's
 * files share their fork's modules (vitest.config.ts, `isolate: false`), and a client another
 * file left reconnecting arms its timers on the fake clock too (a full CI run counted one more).
 */
function armed(share: AgentShare): number {
  const agents = (share as unknown as { agents: Map<string, { timer?: unknown }> }).agents;
  return [...agents.values()].filter((a) => a.timer !== undefined).length;
}

/** A call's work that runs until `end` is called. */
function held(): { work: () => Promise<string>; end: () => void; started: boolean } {
  const h = { started: false, end: () => {}, work: () => Promise.resolve('') };
  h.work = () => {
    h.started = true;
    return new Promise<string>((resolve) => (h.end = () => resolve('done')));
  };
  return h;
}

describe('AgentShare', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('keeps calls over the share waiting on one timer, hands them turns in order, and sends them back once the oldest running call is no longer young', async () => {
    const share = new AgentShare(2, pino({ level: 'silent' }));
    const putBack: string[] = [];
    const calls = Array.from({ length: 26 }, () => held());
    const runs = calls.map((c, i) => share.run(job(`j${i}`, putBack), 't', 0, c.work).catch((err: Error) => err.name));
    await vi.advanceTimersByTimeAsync(0);
    // Two run; 24 wait in the worker, on one timer, not one each (issue 31: 64 reads in flight
    // from one agent armed and cleared a timer per call).
    expect(calls.filter((c) => c.started)).toHaveLength(2);
    expect(armed(share)).toBe(1);

    // A call ends: the oldest waiting one takes its turn.
    calls[0]!.end();
    await vi.advanceTimersByTimeAsync(0);
    expect(await runs[0]).toBe('done');
    expect(calls[2]!.started).toBe(true);
    expect(calls[3]!.started).toBe(false);

    // The oldest running call (calls[1]) grows old: every call still waiting goes back to the queue.
    await vi.advanceTimersByTimeAsync(YOUNG_MS);
    const sentBack = await Promise.all(runs.slice(3));
    expect(sentBack.every((r) => r === 'DelayedError')).toBe(true);
    expect(putBack).toEqual(calls.slice(3).map((_, i) => `j${i + 3}`));
    expect(armed(share)).toBe(0);
    calls[1]!.end();
    calls[2]!.end();
    expect(await Promise.all(runs.slice(1, 3))).toEqual(['done', 'done']);
  });

  it('sends a call over the share back at once when the running calls are already old', async () => {
    const share = new AgentShare(1, pino({ level: 'silent' }));
    const putBack: string[] = [];
    const first = held();
    const running = share.run(job('old', putBack), 't', 0, first.work);
    await vi.advanceTimersByTimeAsync(YOUNG_MS + 1);
    const late = held();
    await expect(share.run(job('late', putBack), 't', 0, late.work)).rejects.toMatchObject({ name: 'DelayedError' });
    expect(late.started).toBe(false);
    expect(putBack).toEqual(['late']);
    first.end();
    expect(await running).toBe('done');
  });
  it('takes a turn at once under the share (tryEnter) and none at it, without waiting or putting back; a turn given back goes to the oldest call waiting in run', async () => {
    // The shard worker's processor takes both shares' turns this way in its one synchronous step
    // (issue 31), falling back to run only when a share is full.
    const share = new AgentShare(2, pino({ level: 'silent' }));
    const putBack: string[] = [];
    const first = share.tryEnter(job('a', putBack), 0);
    const second = share.tryEnter(job('b', putBack), 0);
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(share.tryEnter(job('c', putBack), 0)).toBeUndefined();
    // Another agent's share, or the same agent's on another shard, is its own.
    expect(share.tryEnter({ ...job('d', putBack), data: { workspace: 'w', agent: 'other' } } as Job<CallJobData>, 0)).toBeDefined();
    expect(share.tryEnter(job('e', putBack), 1)).toBeDefined();
    const waiting = held();
    const run = share.run(job('c', putBack), 't', 0, waiting.work);
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.started).toBe(false);
    share.leave(first!);
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.started).toBe(true);
    // The waiting call holds the turn given back: the share is still full.
    expect(share.tryEnter(job('f', putBack), 0)).toBeUndefined();
    share.leave(second!);
    expect(share.tryEnter(job('f', putBack), 0)).toBeDefined();
    waiting.end();
    expect(await run).toBe('done');
    expect(putBack).toEqual([]);
  });
});
