import { describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { ExportSlots } from '../../src/shards/export-slots.ts';

/** The error `fn` throws (or undefined). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('ExportSlots', () => {
  it('refuses past the member’s, the workspace’s and the process’s bound, saying which, with RATE_LIMITED', () => {
    const slots = new ExportSlots({ perMember: 1, perWorkspace: 2, total: 3 });
    slots.take('acme', 'ada');
    const mine = thrown(() => slots.take('acme', 'ada'));
    expect(codeOf(mine)).toBe('RATE_LIMITED');
    expect(mine).toMatchObject({ retryAfter: 5, detail: expect.stringContaining('you already have 1 CSV download') });
    slots.take('acme', 'bob');
    expect(thrown(() => slots.take('acme', 'cy'))).toMatchObject({ detail: expect.stringContaining('your workspace already has 2') });
    slots.take('globex', 'dee');
    expect(thrown(() => slots.take('initech', 'eve'))).toMatchObject({ detail: expect.stringContaining('the server has 3') });
    expect(slots.size).toBe(3);
  });

  it('gives a slot back once, however often its release is called', () => {
    const slots = new ExportSlots({ perMember: 2, perWorkspace: 2, total: 2 });
    const release = slots.take('acme', 'ada');
    slots.take('acme', 'ada');
    release();
    release();
    expect(slots.size).toBe(1);
    slots.take('acme', 'ada');
    expect(codeOf(thrown(() => slots.take('acme', 'ada')))).toBe('RATE_LIMITED');
  });
});
