import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_BUSY_BOUNDS, Unanswered } from '../../src/calls/outage-answers.ts';

// The bound on a wait for Redis passes only when Redis sent nothing at all on the connection for
// its length: a stopped Redis (SIGSTOP) is answered UNAVAILABLE, a busy one is waited for.

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** What the connection's data listener does: Redis sent something now. */
const fresh = () => ({ at: 0 });
const sent = (replies: { at: number }) => {
  replies.at = Date.now();
};

const settled = async (u: Unanswered) => {
  let why: string | undefined;
  void u.passed.then((w) => (why = w));
  await vi.advanceTimersByTimeAsync(0);
  return why;
};

describe('Unanswered', () => {
  it('passes after its length when nothing came from Redis', async () => {
    const replies = fresh();
    const u = new Unanswered(1000, () => 'stopped', replies);
    u.arm();
    await vi.advanceTimersByTimeAsync(999);
    expect(await settled(u)).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(u)).toBe('stopped');
  });

  it('does not pass while Redis keeps sending on the connection, and passes once it stops', async () => {
    const replies = fresh();
    const u = new Unanswered(1000, () => 'stopped', replies);
    u.arm();
    for (let i = 0; i < 3; i++) {
      // A reply every 500 ms: no 1,000 ms without one.
      for (let k = 0; k < 2; k++) {
        await vi.advanceTimersByTimeAsync(500);
        sent(replies);
      }
      expect(await settled(u)).toBeUndefined();
    }
    await vi.advanceTimersByTimeAsync(1000);
    expect(await settled(u)).toBe('stopped');
  });

  it('passes its length after the last thing Redis sent, not a window later (a SIGSTOP just after a reply)', async () => {
    const replies = fresh();
    const u = new Unanswered(1000, () => 'stopped', replies);
    u.arm();
    await vi.advanceTimersByTimeAsync(10);
    sent(replies);
    // Stopped now: nothing more comes. Answered 1,000 ms after that, not at the second window's end (2,000).
    await vi.advanceTimersByTimeAsync(999);
    expect(await settled(u)).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(u)).toBe('stopped');
  });

  it('passes after at most MAX_BUSY_BOUNDS lengths, however busy', async () => {
    const replies = fresh();
    const u = new Unanswered(1000, () => 'too long', replies);
    u.arm();
    for (let i = 1; i < MAX_BUSY_BOUNDS; i++) {
      // A reply every 500 ms: no 1,000 ms without one.
      for (let k = 0; k < 2; k++) {
        await vi.advanceTimersByTimeAsync(500);
        sent(replies);
      }
      expect(await settled(u)).toBeUndefined();
    }
    await vi.advanceTimersByTimeAsync(500);
    sent(replies);
    await vi.advanceTimersByTimeAsync(500);
    expect(await settled(u)).toBe('too long');
  });

  it('never passes once disarmed', async () => {
    const u = new Unanswered(1000, () => 'stopped', fresh());
    u.arm();
    u.disarm();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await settled(u)).toBeUndefined();
  });
});
