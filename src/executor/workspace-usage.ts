/** Idle workspaces not seen for this long are forgotten once many have come: they count as new again. */
const FORGET_AFTER_MS = 10 * 60_000;
/** Records kept before the forgotten ones are swept out. */
const SWEEP_AT = 1024;
/**
 * The most of a round a workspace of cheap statements may start early: half, so it takes at
 * most two turns to one of a workspace of runaways (or one never seen). Ranking by expected
 * executor time alone (a turn charged what it is expected to cost) let twenty busy workspaces
 * of 1 ms reads hold a fresh workspace's first statement back one whole deadline's worth of
 * their turns, 100 s with a pool of 2.
 */
const MAX_CREDIT = 0.5;

interface Record {
  /** Children it holds now. */
  holding: number;
  /** Its lines waiting for a child now. */
  waiting: number;
  /** Executor ms one of its statements is expected to take. */
  cost: number;
  /** The round its last turn ends at (its start plus one). */
  finish: number;
  /** The round its waiting turn starts at, fixed when it began to wait (while it waits). */
  start?: number;
  /** When it last took or gave up a child, for forgetting. */
  at: number;
}

/** Where a workspace stands when a child comes free: what `fairest` ranks its waiting lines by. */
export interface Standing {
  /** Children it holds now: one holding none goes first. */
  holding: number;
  /** The round its waiting turn starts at: the earliest goes first. */
  start: number;
}

/**
 * Each workspace's turns at the pool's children, round-robin: a turn is one round, and the next
 * free child serves the turn that starts first (start-time fair queuing, in rounds). A workspace
 * that begins to wait starts at the current round, never earlier than where its last turn ended
 * (one round after it started) — so workspaces take turns, and one workspace's backlog waits
 * its round like anyone else's. While nothing waits the rounds start over: use nobody else
 * wanted is no debt.
 *
 * One exception makes a quiet workspace beat a burst: a workspace whose statements are known to
 * be cheap starts up to half a round early (its credit: half, less the share of a statement
 * deadline its statements are expected to take). A workspace never seen (or forgotten) is
 * expected to take a whole deadline, so it has none. Under the former rule (least recent
 * executor time first) twenty fresh workspaces each starting a runaway looked as light as a
 * quiet one, and its `SELECT count(*)` waited behind every one of them: 100 s with a pool of 2
 * and a 10 s deadline. Now its turn starts before theirs and it waits at most for the next child
 * to come free; a cheap workspace takes at most two turns to another's one.
 *
 * The expected cost is the mean of its last statements' executor time, halved toward each new
 * one from a start of one deadline: one cheap read earns a little credit, a runaway loses most.
 *
 * Pure bookkeeping: the caller passes the time, and says when a line begins to wait or takes a
 * child.
 */
export class WorkspaceUsage {
  private readonly byWorkspace = new Map<string, Record>();
  /** The start of the latest turn served: the round a workspace that begins to wait starts in. */
  private clock = 0;
  /** The latest end of any turn: where rounds start over once nothing waits. */
  private lastFinish = 0;
  private waitingLines = 0;
  private sweepAt = SWEEP_AT;

  /** @param unknownCostMs what a statement of a workspace never seen is expected to take (the deadline) */
  constructor(private readonly unknownCostMs: number) {}

  /** Children `workspace` holds now. */
  holding(workspace: string): number {
    return this.byWorkspace.get(workspace)?.holding ?? 0;
  }

  /** Executor ms a statement of `workspace` is expected to take. */
  cost(workspace: string): number {
    return this.byWorkspace.get(workspace)?.cost ?? this.unknownCostMs;
  }

  /** Where `workspace` stands now (see {@link Standing}). */
  standing(workspace: string): Standing {
    const r = this.byWorkspace.get(workspace);
    if (!r) return { holding: 0, start: this.clock };
    return { holding: r.holding, start: r.start ?? this.begin(r) };
  }

  /** One of its lines began to wait for a child. */
  waits(workspace: string, now: number): void {
    // Nothing else waits: whatever ran so far ran because nobody else wanted the children.
    if (this.waitingLines === 0) this.clock = Math.max(this.clock, this.lastFinish);
    const r = this.record(workspace, now);
    this.waitingLines++;
    r.waiting++;
    r.start ??= this.begin(r);
  }

  /** One of its lines took a child at `now`: one that waited (`waited`), or at once. */
  take(workspace: string, now: number, waited: boolean): void {
    const r = this.record(workspace, now);
    if (waited) {
      if (r.waiting === 0) throw new Error(`workspace ${workspace} takes a child for a line that did not wait`);
      r.waiting--;
      this.waitingLines--;
    }
    const start = r.start ?? this.begin(r);
    this.clock = Math.max(this.clock, start);
    r.finish = start + 1;
    this.lastFinish = Math.max(this.lastFinish, r.finish);
    r.start = r.waiting > 0 ? this.begin(r) : undefined;
    r.holding++;
    r.at = now;
  }

  /**
   * One of its lines gave its child up at `now`, having run `statements` (each answered, or
   * killed at its deadline) in `spentMs` of executor time (the child's CPU, or a killed
   * statement's deadline): their mean is what it is expected to cost next. Wall time held would
   * also charge the time a child waited for a core, which on a busy host varies tenfold.
   */
  give(workspace: string, now: number, spentMs: number, statements: number): void {
    const r = this.byWorkspace.get(workspace);
    if (!r || r.holding === 0) throw new Error(`workspace ${workspace} gives up a child it does not hold`);
    r.holding--;
    r.at = now;
    if (statements > 0) r.cost = (r.cost + Math.max(0, spentMs) / statements) / 2;
    if (this.byWorkspace.size > this.sweepAt) this.sweep(now);
  }

  /** A line of `workspace` stopped waiting without taking a child (answered without running). */
  leaves(workspace: string): void {
    const r = this.byWorkspace.get(workspace);
    if (!r || r.waiting === 0) return;
    r.waiting--;
    this.waitingLines--;
    if (r.waiting === 0) r.start = undefined;
  }

  /** Workspaces remembered (for tests and status). */
  get size(): number {
    return this.byWorkspace.size;
  }

  /** The round a turn of `r` would start at now. */
  private begin(r: Record): number {
    const credit = MAX_CREDIT * Math.max(0, 1 - r.cost / this.unknownCostMs);
    return Math.max(this.clock, r.finish) - credit;
  }

  private record(workspace: string, now: number): Record {
    let r = this.byWorkspace.get(workspace);
    if (!r) {
      r = { holding: 0, waiting: 0, cost: this.unknownCostMs, finish: 0, at: now };
      this.byWorkspace.set(workspace, r);
    }
    return r;
  }

  private sweep(now: number): void {
    for (const [ws, r] of this.byWorkspace) if (r.holding === 0 && r.waiting === 0 && now - r.at >= FORGET_AFTER_MS) this.byWorkspace.delete(ws);
    // Those still here are busy or recent; sweep again only once as many more have come.
    this.sweepAt = Math.max(SWEEP_AT, this.byWorkspace.size * 2);
  }
}

/** A waiting database, as the fair choice sees it. */
export interface Waiting {
  workspace: string;
  /** Times a free child passed it over for a database of its own. */
  skips: number;
}

/**
 * Whether a turn standing at `b` goes with one at `a`, so that a child may serve it instead to
 * save a reopen: its workspace holds children as `a`'s does (none, or some), and its turn starts
 * within a quarter round of `a`'s (less than a quiet workspace's credit, so a busy workspace's
 * open line never passes a quiet one's).
 */
export function alike(a: Standing, b: Standing): boolean {
  return a.holding > 0 === b.holding > 0 && b.start < a.start + MAX_CREDIT / 2;
}

/**
 * Which waiting database a free child takes. `waiting` is in arrival order and holds only those
 * allowed to run now (under their workspace's share). A workspace holding no child goes before
 * any that holds one, whatever its history: no workspace takes a second child while another
 * waits. Among those, the turn that starts first ({@link WorkspaceUsage}), the oldest of equals.
 * A child takes a database it has open (`open`) instead when its turn is {@link alike} — at
 * most `maxSkips` times in a row past the same first one, so preference never starves it (a
 * reopen costs a file open, WAL set-up and every statement prepared again).
 */
export function fairest<T extends Waiting>(
  waiting: Iterable<T>,
  standing: (workspace: string) => Standing,
  open: (line: T) => boolean,
  maxSkips: number,
): T | undefined {
  const seen = new Map<string, Standing>();
  const of = (ws: string) => {
    let s = seen.get(ws);
    if (s === undefined) seen.set(ws, (s = standing(ws)));
    return s;
  };
  let first: T | undefined;
  let best: Standing | undefined;
  for (const line of waiting) {
    const s = of(line.workspace);
    if (!best || before(s, best)) {
      first = line;
      best = s;
    }
  }
  if (!first || !best || open(first) || first.skips >= maxSkips) return first;
  for (const line of waiting) {
    if (line !== first && alike(best, of(line.workspace)) && open(line)) {
      first.skips++;
      return line;
    }
  }
  return first;
}

/** Whether a turn standing at `a` goes strictly before one at `b` (equals keep arrival order). */
function before(a: Standing, b: Standing): boolean {
  if (a.holding > 0 !== b.holding > 0) return b.holding > 0;
  return a.start < b.start;
}
