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
});
