import { describe, expect, it } from 'vitest';
import { EVEN_WITHIN_MS, fairest, HALF_LIFE_MS, WorkspaceUsage, type Waiting } from '../../src/store/workspace-usage.ts';

const line = (workspace: string, name = workspace): Waiting & { name: string } => ({ workspace, name, skips: 0 });

describe('WorkspaceUsage', () => {
  it('charges the time a child was held, counts a held child as time passes, and halves it every half-life', () => {
    const u = new WorkspaceUsage();
    u.take('w', 1000);
    expect(u.holding('w')).toBe(1);
    expect(u.recent('w', 4000)).toBe(3000);
    u.give('w', 1000, 4000);
    expect(u.holding('w')).toBe(0);
    expect(u.recent('w', 4000)).toBe(3000);
    expect(u.recent('w', 4000 + HALF_LIFE_MS)).toBeCloseTo(1500);
    expect(u.recent('never', 4000)).toBe(0);
  });

  it('counts each child a workspace holds', () => {
    const u = new WorkspaceUsage();
    u.take('w', 0);
    u.take('w', 100);
    expect(u.holding('w')).toBe(2);
    expect(u.recent('w', 200)).toBe(300);
    u.give('w', 0, 200);
    expect(u.recent('w', 200)).toBeCloseTo(300);
  });

  it('forgets idle workspaces with no time left once many have come and gone', () => {
    const u = new WorkspaceUsage();
    for (let i = 0; i < 3000; i++) {
      u.take(`w${i}`, i);
      u.give(`w${i}`, i, i);
    }
    u.take('busy', 0);
    expect(u.size).toBeLessThan(1100);
    expect(u.holding('busy')).toBe(1);
  });

  it('refuses to give back a child never taken (a bookkeeping bug)', () => {
    expect(() => new WorkspaceUsage().give('w', 0, 1)).toThrow();
  });
});

describe('fairest', () => {
  const never = () => false;

  it('serves the workspace with the least recent executor time first, however many heavy ones waited longer', () => {
    const heavy = Array.from({ length: 20 }, (_, i) => line(`runaway${i}`));
    const quiet = line('quiet');
    const recent = (ws: string) => (ws === 'quiet' ? 0.4 : 3000);
    expect(fairest([...heavy, quiet], recent, never, 2)).toBe(quiet);
  });

  it('takes the oldest among equals', () => {
    const a = line('a');
    const b = line('b');
    expect(fairest([a, b], () => 5, never, 2)).toBe(a);
    expect(fairest([b, a], () => 5, never, 2)).toBe(b);
  });

  it('takes a line the child has open when its workspace is within reach of the least, at most maxSkips times past the fair one', () => {
    const fair = line('a');
    const mine = line('b');
    const recent = (ws: string) => (ws === 'a' ? 10 : 10 + EVEN_WITHIN_MS);
    const open = (l: Waiting) => l === mine;
    expect(fairest([fair, mine], recent, open, 2)).toBe(mine);
    expect(fairest([fair, mine], recent, open, 2)).toBe(mine);
    expect(fairest([fair, mine], recent, open, 2)).toBe(fair);
  });

  it('never prefers an open line of a workspace well past the least', () => {
    const quiet = line('quiet');
    const mine = line('heavy');
    expect(fairest([quiet, mine], (ws) => (ws === 'quiet' ? 0 : 3000), (l) => l === mine, 2)).toBe(quiet);
  });

  it('answers undefined when nothing waits', () => {
    expect(fairest([], () => 0, never, 2)).toBeUndefined();
  });
});
