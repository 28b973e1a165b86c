import { describe, expect, it } from 'vitest';
import { fairest, HALF_LIFE_MS, markedlyLighter, WorkspaceUsage, type Waiting } from '../../src/executor/workspace-usage.ts';

const line = (workspace: string, name = workspace): Waiting & { name: string } => ({ workspace, name, skips: 0 });

describe('WorkspaceUsage', () => {
  it('counts a held child as time passes, charges what was spent once it is given back, and halves it every half-life', () => {
    const u = new WorkspaceUsage();
    u.take('w', 1000);
    expect(u.holding('w')).toBe(1);
    expect(u.recent('w', 4000)).toBe(3000);
    u.give('w', 1000, 4000, 2000);
    expect(u.holding('w')).toBe(0);
    expect(u.recent('w', 4000)).toBe(2000);
    expect(u.recent('w', 4000 + HALF_LIFE_MS)).toBeCloseTo(1000);
    expect(u.recent('never', 4000)).toBe(0);
  });

  it('counts each child a workspace holds', () => {
    const u = new WorkspaceUsage();
    u.take('w', 0);
    u.take('w', 100);
    expect(u.holding('w')).toBe(2);
    expect(u.recent('w', 200)).toBe(300);
    u.give('w', 0, 200, 150);
    expect(u.recent('w', 200)).toBeCloseTo(250);
  });

  it('forgets idle workspaces with no time left once many have come and gone', () => {
    const u = new WorkspaceUsage();
    for (let i = 0; i < 3000; i++) {
      u.take(`w${i}`, i);
      u.give(`w${i}`, i, i, 0);
    }
    u.take('busy', 0);
    expect(u.size).toBeLessThan(1100);
    expect(u.holding('busy')).toBe(1);
  });

  it('refuses to give back a child never taken (a bookkeeping bug)', () => {
    expect(() => new WorkspaceUsage().give('w', 0, 1, 1)).toThrow();
  });
});

describe('fairest', () => {
  const never = () => false;

  it('serves a workspace with next to nothing running first, however many heavy ones waited longer', () => {
    const heavy = Array.from({ length: 20 }, (_, i) => line(`runaway${i}`));
    const quiet = line('quiet');
    const recent = (ws: string) => (ws === 'quiet' ? 0.4 : 3000);
    expect(fairest([...heavy, quiet], recent, never, 2)).toBe(quiet);
  });

  it('takes the lightest among markedly lighter ones, however late they came', () => {
    const lines = [line('a'), line('b'), line('c'), line('d')];
    const use: Record<string, number> = { a: 1000, b: 400, c: 300, d: 100 };
    expect(fairest(lines, (ws) => use[ws]!, never, 2)!.workspace).toBe('d');
  });

  it('keeps arrival order among workspaces of like load, the one charged a little more included', () => {
    const a = line('a');
    const b = line('b');
    const c = line('c');
    const use: Record<string, number> = { a: 1170, b: 670, c: 690 };
    expect(fairest([a, b, c], (ws) => use[ws]!, never, 2)).toBe(a);
    expect(fairest([b, a], () => 5, never, 2)).toBe(b);
    expect(fairest([line('x'), line('fresh')], (ws) => (ws === 'x' ? 0.4 : 0), never, 2)!.workspace).toBe('x');
  });

  it('takes a line the child has open unless its workspace is markedly heavier, at most maxSkips times past the fair one', () => {
    const fair = line('a');
    const mine = line('b');
    const recent = (ws: string) => (ws === 'a' ? 500 : 900);
    const open = (l: Waiting) => l === mine;
    expect(fairest([fair, mine], recent, open, 2)).toBe(mine);
    expect(fairest([fair, mine], recent, open, 2)).toBe(mine);
    expect(fairest([fair, mine], recent, open, 2)).toBe(fair);
  });

  it('never prefers an open line of a markedly heavier workspace', () => {
    const quiet = line('quiet');
    const mine = line('heavy');
    expect(
      fairest(
        [quiet, mine],
        (ws) => (ws === 'quiet' ? 0 : 3000),
        (l) => l === mine,
        2,
      ),
    ).toBe(quiet);
  });

  it('calls under half, by more than a millisecond, markedly lighter', () => {
    expect(markedlyLighter(0.4, 3000)).toBe(true);
    expect(markedlyLighter(600, 1170)).toBe(false);
    expect(markedlyLighter(0, 0.9)).toBe(false);
  });

  it('answers undefined when nothing waits', () => {
    expect(fairest([], () => 0, never, 2)).toBeUndefined();
  });
});
