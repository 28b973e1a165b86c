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

  it('gives a ninth workspace a slot when eight whose readers take nothing hold all 64, ending the oldest of one holding the most', () => {
    const slots = new ExportSlots();
    const ended: string[] = [];
    for (let w = 1; w <= 8; w++) {
      for (let i = 0; i < 8; i++) slots.take(`slow${w}`, `m${i % 4}`, () => ended.push(`slow${w}/${i}`));
    }
    expect(slots.size).toBe(64);
    slots.take('ninth', 'ada', () => ended.push('ninth'));
    expect(ended).toEqual(['slow1/0']);
    expect(slots.size).toBe(64);
    // Slots move towards an even share: a workspace holding 7 (one fewer than the most) takes none back.
    expect(codeOf(thrown(() => slots.take('slow1', 'm3')))).toBe('RATE_LIMITED');
    slots.take('ninth', 'bob');
    expect(ended).toEqual(['slow1/0', 'slow2/0']);
  });

  it('takes back none when no workspace holds two more than the asker, nor slots without an end', () => {
    const slots = new ExportSlots({ perMember: 1, perWorkspace: 8, total: 4 });
    const ended: string[] = [];
    for (const w of ['a', 'b', 'c', 'd']) slots.take(w, 'x', () => ended.push(w));
    expect(thrown(() => slots.take('e', 'x'))).toMatchObject({ detail: expect.stringContaining('the server has 4') });
    const plain = new ExportSlots({ perMember: 4, perWorkspace: 4, total: 4 });
    for (const m of ['p', 'q', 'r', 's']) plain.take('a', m);
    expect(codeOf(thrown(() => plain.take('e', 'x')))).toBe('RATE_LIMITED');
    expect(ended).toEqual([]);
  });

  it('frees a slot taken back even when ending its export fails, and its own release after is a no-op', () => {
    const slots = new ExportSlots({ perMember: 2, perWorkspace: 2, total: 2 });
    const release = slots.take('a', 'x', () => {
      throw new Error('socket gone');
    });
    slots.take('a', 'y', () => undefined);
    slots.take('b', 'z');
    release();
    expect(slots.size).toBe(2);
  });
});
