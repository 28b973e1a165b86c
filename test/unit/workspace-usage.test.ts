import { describe, expect, it } from 'vitest';
import { alike, fairest, WorkspaceUsage, type Standing, type Waiting } from '../../src/executor/workspace-usage.ts';

const DEADLINE = 10_000;

interface TestLine extends Waiting {
  name: string;
  /** Executor ms each of its statements takes, in order. */
  statements: number[];
}

const line = (workspace: string, statements: number[] = [1], name = workspace): TestLine => ({ workspace, name, skips: 0, statements });
const never = () => false;

/**
 * A pool of `children` run by the rules alone, no processes: every line waits from the start
 * (in the order given) unless `arrive` says when; each statement holds its child for its cost
 * (in ms of a clock this drives), and a line whose statement ended waits again at the back.
 * Answers the names in the order their statements started.
 */
function serveOrder(children: number, lines: TestLine[], usage = new WorkspaceUsage(DEADLINE), arrive: Map<TestLine, number> = new Map()): string[] {
  const order: string[] = [];
  const ready: TestLine[] = [];
  const running: { line: TestLine; ends: number }[] = [];
  const pending = lines.map((l) => ({ l, at: arrive.get(l) ?? 0 }));
  let now = 0;
  const enter = (l: TestLine) => {
    ready.push(l);
    usage.waits(l.workspace, now);
  };
  for (;;) {
    for (const p of pending.filter((p) => p.at <= now)) {
      pending.splice(pending.indexOf(p), 1);
      enter(p.l);
    }
    while (running.length < children && ready.length) {
      const next = fairest(ready, (ws) => usage.standing(ws), never, children)!;
      ready.splice(ready.indexOf(next), 1);
      usage.take(next.workspace, now, true);
      order.push(next.name);
      running.push({ line: next, ends: now + next.statements[0]! });
    }
    if (!running.length && !pending.length) return order;
    now = Math.min(...running.map((r) => r.ends), ...pending.map((p) => p.at));
    for (const r of running.filter((r) => r.ends <= now)) {
      running.splice(running.indexOf(r), 1);
      const cost = r.line.statements.shift()!;
      usage.give(r.line.workspace, now, cost, 1);
      if (r.line.statements.length) enter(r.line);
    }
  }
}

describe('WorkspaceUsage', () => {
  it('expects a statement of a workspace never seen to take a whole deadline, then the mean of what its statements took, halved toward each', () => {
    const u = new WorkspaceUsage(DEADLINE);
    expect(u.cost('new')).toBe(DEADLINE);
    u.take('w', 0, false);
    expect(u.holding('w')).toBe(1);
    u.give('w', 5, 10, 2);
    expect(u.holding('w')).toBe(0);
    expect(u.cost('w')).toBe((DEADLINE + 5) / 2);
    u.take('w', 5, false);
    u.give('w', 6, 0, 0);
    // Nothing ran (a line that gave its child up for a restore): nothing learnt.
    expect(u.cost('w')).toBe((DEADLINE + 5) / 2);
  });

  it('starts a waiting turn at the current round, a cheap workspace up to half a round early, never before its last turn ended', () => {
    const u = new WorkspaceUsage(100);
    u.waits('fresh', 0);
    expect(u.standing('fresh')).toEqual({ holding: 0, start: 0 });
    u.take('fresh', 0, true);
    expect(u.standing('fresh')).toEqual({ holding: 1, start: 1 });
    u.give('fresh', 0, 100, 1);
    // Runaways earn no credit.
    expect(u.standing('fresh').start).toBe(1);
    u.take('cheap', 0, false);
    u.give('cheap', 0, 0, 1);
    // Its first turn started at round 0 (it took a child at once), and ended at 1.
    expect(u.standing('cheap').start).toBe(1 - 0.25);
    // Its second line waits for its next turn, a round after the first.
    u.waits('cheap', 1);
    u.waits('cheap', 1);
    u.take('cheap', 1, true);
    expect(u.standing('cheap').start).toBe(1.75 - 0.25);
    u.leaves('cheap');
    expect(u.standing('cheap').start).toBe(1.5);
  });

  it('starts the rounds over while nothing waits: use nobody else wanted is no debt', () => {
    const u = new WorkspaceUsage(100);
    for (let i = 0; i < 10; i++) {
      u.take('alone', i, false);
      u.give('alone', i, 100, 1);
    }
    u.waits('other', 10);
    expect(u.standing('other').start).toBe(10);
    expect(u.standing('alone').start).toBe(10);
  });

  it('forgets idle workspaces not seen for a while once many have come and gone: they count as new again', () => {
    const u = new WorkspaceUsage(DEADLINE);
    u.take('old', 0, false);
    u.give('old', 0, 1, 1);
    u.take('busy', 0, false);
    for (let i = 0; i < 3000; i++) {
      u.take(`w${i}`, 3_600_000 + i, false);
      u.give(`w${i}`, 3_600_000 + i, 1, 1);
    }
    expect(u.size).toBeLessThan(3002);
    expect(u.cost('old')).toBe(DEADLINE);
    expect(u.holding('busy')).toBe(1);
  });

  it('refuses to give back a child never taken, or take one for a line that never waited (bookkeeping bugs)', () => {
    expect(() => new WorkspaceUsage(DEADLINE).give('w', 0, 1, 1)).toThrow();
    expect(() => new WorkspaceUsage(DEADLINE).take('w', 0, true)).toThrow();
  });
});

describe('the order a pool serves workspaces in', () => {
  it('serves a quiet workspace at the next free child, however many fresh workspaces started a runaway before it (issue 27)', () => {
    const usage = new WorkspaceUsage(DEADLINE);
    // The quiet workspace has read once before: its reads are known to be cheapish.
    expect(serveOrder(2, [line('quiet', [1])], usage)).toEqual(['quiet']);
    const burst = Array.from({ length: 20 }, (_, i) => line(`fresh${i}`, [DEADLINE], `fresh${i}`));
    const read = line('quiet', [1], 'read');
    const order = serveOrder(2, [...burst, read], usage, new Map([[read, 1]]));
    // The two children took the first two runaways; the read goes at the next free one.
    expect(order.indexOf('read')).toBe(2);
    expect(order.filter((n) => n !== 'read')).toEqual(burst.map((l) => l.name));
  });

  it('serves workspaces round-robin: one backlog waits its round like anyone else', () => {
    const lines = [line('a', [5, 5, 5], 'a'), line('b', [5, 5, 5], 'b'), line('c', [5, 5, 5], 'c')];
    expect(serveOrder(1, lines)).toEqual(['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c']);
  });

  it('gives a workspace that arrives behind a long backlog its turn after one of the backlog, not after all of it', () => {
    const usage = new WorkspaceUsage(DEADLINE);
    const backlog = line('heavy', Array(10).fill(DEADLINE), 'heavy');
    const late = line('late', [DEADLINE], 'late');
    const order = serveOrder(1, [backlog, late], usage, new Map([[late, 1]]));
    expect(order.indexOf('late')).toBe(1);
  });

  it('gives a workspace of cheap statements at most two turns to one of a workspace of runaways', () => {
    const usage = new WorkspaceUsage(100);
    serveOrder(1, [line('cheap', [0, 0, 0, 0]), line('dear', [100])], usage);
    const order = serveOrder(1, [line('dear', Array(4).fill(100), 'dear'), line('cheap', Array(20).fill(0), 'cheap')], usage);
    const dear = order.flatMap((n, i) => (n === 'dear' ? [i] : []));
    expect(dear).toHaveLength(4);
    for (let i = 1; i < dear.length; i++) expect(dear[i]! - dear[i - 1]! - 1).toBeLessThanOrEqual(2);
    expect(dear[0]).toBeLessThanOrEqual(2);
  });

  it('never gives a workspace a second child while another waits, whatever the waiting one did before', () => {
    const usage = new WorkspaceUsage(100);
    // `heavy` ran a runaway, `light` is known cheap; `light` now holds a child.
    serveOrder(1, [line('heavy', [100]), line('light', [1])], usage);
    usage.take('light', 0, false);
    const mine = line('light', [1], 'light-second');
    const theirs = line('heavy', [100], 'heavy');
    usage.waits('light', 0);
    usage.waits('heavy', 0);
    expect(fairest([mine, theirs], (ws) => usage.standing(ws), never, 2)).toBe(theirs);
    // With nobody else waiting, a second child is fine.
    expect(fairest([mine], (ws) => usage.standing(ws), never, 2)).toBe(mine);
  });
});

describe('fairest', () => {
  const at = (start: number, holding = 0): Standing => ({ holding, start });

  it('keeps arrival order between turns that start together', () => {
    const [a, b, c] = [line('a'), line('b'), line('c')];
    expect(fairest([a, b, c], () => at(0), never, 2)).toBe(a);
    expect(fairest([c, b, a], () => at(0), never, 2)).toBe(c);
  });

  it('takes a line the child has open when its turn is alike, at most maxSkips times past the first', () => {
    const first = line('a');
    const mine = line('b');
    const standing = (ws: string) => (ws === 'a' ? at(1) : at(1.2));
    const open = (l: Waiting) => l === mine;
    expect(fairest([first, mine], standing, open, 2)).toBe(mine);
    expect(fairest([first, mine], standing, open, 2)).toBe(mine);
    expect(fairest([first, mine], standing, open, 2)).toBe(first);
  });

  it("never prefers an open line of a workspace whose turn starts a quiet one's credit later, or that holds a child", () => {
    const quiet = line('quiet');
    const mine = line('other');
    const open = (l: Waiting) => l === mine;
    expect(fairest([quiet, mine], (ws) => (ws === 'quiet' ? at(0.75) : at(1)), open, 2)).toBe(quiet);
    expect(fairest([quiet, mine], (ws) => (ws === 'quiet' ? at(1) : at(1, 1)), open, 2)).toBe(quiet);
    expect(alike(at(1), at(1.2))).toBe(true);
    expect(alike(at(1), at(1.25))).toBe(false);
  });

  it('answers undefined when nothing waits', () => {
    expect(fairest([], () => at(0), never, 2)).toBeUndefined();
  });

  it('serves a workspace holding no child before one holding a child, however much earlier the latter’s turn starts', () => {
    const second = line('busy');
    const idle = line('idle');
    expect(fairest([second, idle], (ws) => (ws === 'busy' ? at(0, 1) : at(50)), never, 2)).toBe(idle);
  });
});
