import { describe, expect, it } from 'vitest';
import { fairest, tier, WorkspaceUsage, type Aging, type Standing, type Waiting } from '../../src/executor/workspace-usage.ts';

const DEADLINE = 10_000;

interface TestLine extends Waiting {
  name: string;
  /** Executor ms each of its statements takes, in order. */
  statements: number[];
  promoted?: boolean;
}

const line = (workspace: string, statements: number[] = [1], name = workspace): TestLine => ({ workspace, name, skips: 0, since: 0, statements });
const never = () => false;
/** Nobody has waited a deadline. */
const young: Aging = { now: 0, afterMs: DEADLINE, open: true };

/**
 * A pool of `children` run by the rules alone, no processes: every line waits from the start
 * (in the order given) unless `arrive` says when; each statement holds its child for its cost
 * (in ms of a clock this drives), and a line whose statement ended waits again at the back.
 * Answers the names in the order their statements started (and when each started, in `startedAt`).
 */
function serveOrder(
  children: number,
  lines: TestLine[],
  usage = new WorkspaceUsage(DEADLINE),
  arrive: Map<TestLine, number> = new Map(),
  startedAt: Map<string, number> = new Map(),
): string[] {
  const order: string[] = [];
  const ready: TestLine[] = [];
  const running: { line: TestLine; ends: number }[] = [];
  const pending = lines.map((l) => ({ l, at: arrive.get(l) ?? 0 }));
  let now = 0;
  let promoted = 0;
  let cheapStreak = 0;
  const enter = (l: TestLine) => {
    ready.push(l);
    l.since = now;
    usage.waits(l.workspace, now);
  };
  for (;;) {
    for (const p of pending.filter((p) => p.at <= now)) {
      pending.splice(pending.indexOf(p), 1);
      enter(p.l);
    }
    while (running.length < children && ready.length) {
      // As the pool does: a long waiter goes first only once cheap ones took every child in a row.
      const aging = { now, afterMs: DEADLINE, open: promoted === 0 && cheapStreak >= children };
      const next = fairest(ready, (ws) => usage.standing(ws), never, children, aging)!;
      ready.splice(ready.indexOf(next), 1);
      const picked = tier(next, usage.standing(next.workspace), aging);
      cheapStreak = picked === 1 ? cheapStreak + 1 : 0;
      next.promoted = picked === 0;
      if (next.promoted) promoted++;
      usage.take(next.workspace, now, true);
      order.push(next.name);
      startedAt.set(next.name, now);
      running.push({ line: next, ends: now + next.statements[0]! });
    }
    if (!running.length && !pending.length) return order;
    now = Math.min(...running.map((r) => r.ends), ...pending.map((p) => p.at));
    for (const r of running.filter((r) => r.ends <= now)) {
      running.splice(running.indexOf(r), 1);
      if (r.line.promoted) promoted--;
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

  it('calls a workspace cheap after two cheap statements, and not after a runaway', () => {
    const u = new WorkspaceUsage(DEADLINE);
    expect(u.standing('new').cheap).toBe(false);
    u.take('w', 0, false);
    u.give('w', 0, 1, 1);
    expect(u.standing('w').cheap).toBe(false);
    u.take('w', 0, false);
    u.give('w', 0, 1, 1);
    expect(u.standing('w').cheap).toBe(true);
    u.take('w', 0, false);
    u.give('w', 0, DEADLINE, 1);
    expect(u.standing('w').cheap).toBe(false);
  });

  it('starts a waiting turn at the current round, never before its last turn ended', () => {
    const u = new WorkspaceUsage(100);
    u.waits('a', 0);
    expect(u.standing('a')).toEqual({ holding: 0, cheap: false, start: 0 });
    u.take('a', 0, true);
    expect(u.standing('a')).toMatchObject({ holding: 1, start: 1 });
    u.waits('b', 0);
    u.waits('b', 0);
    // Nothing waited when b began to: the rounds started over after a's turn.
    expect(u.standing('b').start).toBe(1);
    u.take('b', 0, true);
    // Its second line waits for its next turn, a round after the first.
    expect(u.standing('b').start).toBe(2);
    u.leaves('b');
    u.give('a', 0, 100, 1);
    u.give('b', 0, 100, 1);
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
  /** A usage that has seen `workspace` run `n` statements of `ms` each. */
  const known = (usage: WorkspaceUsage, workspace: string, n: number, ms: number) => {
    for (let i = 0; i < n; i++) {
      usage.take(workspace, 0, false);
      usage.give(workspace, 0, ms, 1);
    }
    return usage;
  };

  it('serves a quiet workspace at the next free child, however many fresh workspaces started a runaway before it (issue 27)', () => {
    const usage = known(new WorkspaceUsage(DEADLINE), 'quiet', 2, 1);
    const burst = Array.from({ length: 20 }, (_, i) => line(`fresh${i}`, [DEADLINE], `fresh${i}`));
    // It keeps reading, one read at a time, all through the burst.
    const reads = Array.from({ length: 10 }, (_, i) => line('quiet', [1], `read${i}`));
    const arrive = new Map(reads.map((r, i) => [r, 1 + i * DEADLINE] as const));
    const startedAt = new Map<string, number>();
    const order = serveOrder(2, [...burst, ...reads], usage, arrive, startedAt);
    // Each read goes at the next free child: it waits at most one deadline (of this simulated
    // clock), though the burst keeps both children busy for ten.
    for (const r of reads) expect(startedAt.get(r.name)! - arrive.get(r)!).toBeLessThanOrEqual(DEADLINE);
    expect(order.indexOf('read0')).toBe(2);
    expect(order.filter((n) => n.startsWith('fresh'))).toEqual(burst.map((l) => l.name));
  });

  it('serves workspaces round-robin: one backlog waits its round like anyone else', () => {
    const lines = [line('a', [5, 5, 5], 'a'), line('b', [5, 5, 5], 'b'), line('c', [5, 5, 5], 'c')];
    const usage = known(known(known(new WorkspaceUsage(DEADLINE), 'a', 2, 5), 'b', 2, 5), 'c', 2, 5);
    expect(serveOrder(1, lines, usage)).toEqual(['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c']);
    // Three workspaces of runaways alike.
    const runaways = [line('x', [DEADLINE, DEADLINE], 'x'), line('y', [DEADLINE, DEADLINE], 'y'), line('z', [DEADLINE, DEADLINE], 'z')];
    expect(serveOrder(1, runaways)).toEqual(['x', 'y', 'z', 'x', 'y', 'z']);
  });

  it('gives a workspace that arrives behind a long backlog its turn after one of the backlog, not after all of it', () => {
    const backlog = line('heavy', Array(10).fill(DEADLINE), 'heavy');
    const late = line('late', [DEADLINE], 'late');
    const order = serveOrder(1, [backlog, late], new WorkspaceUsage(DEADLINE), new Map([[late, 1]]));
    expect(order.indexOf('late')).toBe(1);
  });

  it('lets one line at a time that waited a whole deadline go before cheap ones that keep every child busy', () => {
    const usage = new WorkspaceUsage(DEADLINE);
    const cheap = Array.from({ length: 4 }, (_, i) => known(usage, `cheap${i}`, 2, 1) && line(`cheap${i}`, Array(20_000).fill(1), `cheap${i}`));
    const fresh = [line('fresh0', [1], 'fresh0'), line('fresh1', [1], 'fresh1')];
    const order = serveOrder(2, [...cheap, ...fresh], usage);
    // Each waits about a deadline (a statement of 1 ms each turn, two children): not for ever.
    expect(order.indexOf('fresh0')).toBeGreaterThan(0);
    expect(order.indexOf('fresh0')).toBeLessThan(2 * DEADLINE + 10);
    expect(order.indexOf('fresh1')).toBeLessThan(2 * DEADLINE + 10);
  });

  it('never gives a workspace a second child while another waits, whatever the waiting one did before', () => {
    const usage = known(known(new WorkspaceUsage(100), 'light', 2, 0), 'heavy', 1, 100);
    usage.take('light', 0, false);
    const mine = line('light', [1], 'light-second');
    const theirs = line('heavy', [100], 'heavy');
    usage.waits('light', 0);
    usage.waits('heavy', 0);
    expect(usage.standing('light').cheap).toBe(true);
    expect(fairest([mine, theirs], (ws) => usage.standing(ws), never, 2, young)).toBe(theirs);
    // With nobody else waiting, a second child is fine.
    expect(fairest([mine], (ws) => usage.standing(ws), never, 2, young)).toBe(mine);
  });
});

describe('fairest', () => {
  const at = (start: number, opts: { holding?: number; cheap?: boolean } = {}): Standing => ({ holding: opts.holding ?? 0, cheap: opts.cheap ?? false, start });

  it('keeps arrival order between turns that start together', () => {
    const [a, b, c] = [line('a'), line('b'), line('c')];
    expect(fairest([a, b, c], () => at(0), never, 2, young)).toBe(a);
    expect(fairest([c, b, a], () => at(0), never, 2, young)).toBe(c);
  });

  it('serves cheap workspaces first; then one that waited a deadline, only while no other such holds a child', () => {
    const fresh = { ...line('fresh'), since: 0 };
    const quiet = { ...line('quiet'), since: 5 };
    const standing = (ws: string) => (ws === 'quiet' ? at(3, { cheap: true }) : at(0));
    expect(fairest([fresh, quiet], standing, never, 2, young)).toBe(quiet);
    expect(fairest([fresh, quiet], standing, never, 2, { now: DEADLINE, afterMs: DEADLINE, open: true })).toBe(fresh);
    expect(fairest([fresh, quiet], standing, never, 2, { now: DEADLINE, afterMs: DEADLINE, open: false })).toBe(quiet);
  });

  it('takes a line the child has open when it is alike, at most maxSkips times past the first', () => {
    const first = line('a');
    const mine = line('b');
    const standing = (ws: string) => (ws === 'a' ? at(1) : at(1.5));
    const open = (l: Waiting) => l === mine;
    expect(fairest([first, mine], standing, open, 2, young)).toBe(mine);
    expect(fairest([first, mine], standing, open, 2, young)).toBe(mine);
    expect(fairest([first, mine], standing, open, 2, young)).toBe(first);
  });

  it('never prefers an open line of another tier, a round later, or one holding a child', () => {
    const quiet = line('quiet');
    const mine = line('other');
    const open = (l: Waiting) => l === mine;
    expect(fairest([quiet, mine], (ws) => (ws === 'quiet' ? at(1, { cheap: true }) : at(1)), open, 2, young)).toBe(quiet);
    expect(fairest([quiet, mine], (ws) => (ws === 'quiet' ? at(1) : at(2)), open, 2, young)).toBe(quiet);
    expect(fairest([quiet, mine], (ws) => (ws === 'quiet' ? at(1) : at(1, { holding: 1 })), open, 2, young)).toBe(quiet);
  });

  it('serves a workspace holding no child before one holding a child, however much earlier the latter’s turn starts', () => {
    const second = line('busy');
    const idle = line('idle');
    expect(fairest([second, idle], (ws) => (ws === 'busy' ? at(0, { holding: 1, cheap: true }) : at(50)), never, 2, young)).toBe(idle);
  });

  it('answers undefined when nothing waits', () => {
    expect(fairest([], () => at(0), never, 2, young)).toBeUndefined();
  });
});
