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

const settled = async (u: Unanswered) => {
  let why: string | undefined;
  void u.passed.then((w) => (why = w));
  await vi.advanceTimersByTimeAsync(0);
  return why;
};

describe('Unanswered', () => {
  it('passes after its length when nothing came from Redis', async () => {
    const replies = { count: 7 };
    const u = new Unanswered(1000, () => 'stopped', replies);
    u.arm();
    await vi.advanceTimersByTimeAsync(999);
    expect(await settled(u)).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(u)).toBe('stopped');
  });

  it('does not pass while Redis keeps sending on the connection, and passes once it stops', async () => {
    const replies = { count: 0 };
    const u = new Unanswered(1000, () => 'stopped', replies);
    u.arm();
    for (let i = 0; i < 3; i++) {
      replies.count++;
      await vi.advanceTimersByTimeAsync(1000);
      expect(await settled(u)).toBeUndefined();
    }
    await vi.advanceTimersByTimeAsync(1000);
    expect(await settled(u)).toBe('stopped');
  });

  it('passes after at most MAX_BUSY_BOUNDS lengths, however busy', async () => {
    const replies = { count: 0 };
    const u = new Unanswered(1000, () => 'too long', replies);
    u.arm();
    for (let i = 1; i < MAX_BUSY_BOUNDS; i++) {
      replies.count++;
      await vi.advanceTimersByTimeAsync(1000);
      expect(await settled(u)).toBeUndefined();
    }
    replies.count++;
    await vi.advanceTimersByTimeAsync(1000);
    expect(await settled(u)).toBe('too long');
  });

  it('never passes once disarmed', async () => {
    const u = new Unanswered(1000, () => 'stopped', { count: 0 });
    u.arm();
    u.disarm();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await settled(u)).toBeUndefined();
  });
});
