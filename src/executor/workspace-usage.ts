/** Idle workspaces not seen for this long are forgotten once many have come: they count as new again. */
const FORGET_AFTER_MS = 10 * 60_000;
/** Records kept before the forgotten ones are swept out. */
const SWEEP_AT = 1024;
/**
 * A workspace whose statements are expected to take under this share of a statement deadline is
 * served before those that are not (one never seen is expected to take a whole deadline; its
 * first two cheap statements bring it under).
 */
const CHEAP_SHARE = 1 / 3;

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
  /** Its statements are known to be cheap: it goes before those that are not. */
  cheap: boolean;
  /** The round its waiting turn starts at: the earliest goes first. */
  start: number;
}

/**
 * Each workspace's turns at the pool's children, round-robin: a turn is one round, and among
 * like workspaces the next free child serves the turn that starts first (start-time fair
 * queuing, in rounds). A workspace that begins to wait starts at the current round, never
 * earlier than where its last turn ended (one round after it started) — so workspaces take
 * turns, and one workspace's backlog waits its round like anyone else's. While nothing waits
 * the rounds start over: use nobody else wanted is no debt.
 *
 * Workspaces whose statements are known to be cheap go before the others (see `fairest`). A
 * workspace never seen (or forgotten) is expected to take a whole statement deadline, so it is
 * not: under the former rule (least recent executor time first) twenty fresh workspaces each
 * starting a runaway looked as light as a quiet one, and its `SELECT count(*)` waited behind
 * every one of them, 100 s with a pool of 2 and a 10 s deadline. Turns in rounds alone did no
 * better: the quiet workspace, having had its turn, waited for the burst's whole round.
 *
 * The expected cost is the mean of its last statements' executor time, halved toward each new
 * one from a start of one deadline: two cheap statements make a workspace cheap, a runaway
 * undoes it.
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
    if (!r) return { holding: 0, cheap: false, start: this.clock };
    return { holding: r.holding, cheap: r.cost < CHEAP_SHARE * this.unknownCostMs, start: r.start ?? this.begin(r) };
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
    return Math.max(this.clock, r.finish);
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
  /** When it began to wait. */
  since: number;
}

/** When a line not known to be cheap has waited too long. */
export interface Aging {
  now: number;
  /** Waited this long (a statement deadline), it goes first. */
  afterMs: number;
  /** One may go first for its wait now (none that did holds a child, and cheap ones took every child in a row). */
  open: boolean;
}

/**
 * Which of three a waiting line is, first served first: 0, not known to be cheap but waiting
 * past `aging.afterMs` while `aging.open`; 1, its workspace's statements are known to be cheap;
 * 2, the others. Cheap ones first keep a quiet workspace ahead of any burst of fresh or runaway
 * ones; a long waiter ahead of them, one at a time and only once cheap ones have taken every
 * child in a row, keeps cheap ones that fill every child from starving the rest.
 */
export function tier(line: Waiting, s: Standing, aging: Aging): 0 | 1 | 2 {
  if (s.cheap) return 1;
  return aging.open && aging.now - line.since >= aging.afterMs ? 0 : 2;
}

/**
 * Which waiting database a free child takes. `waiting` is in arrival order and holds only those
 * allowed to run now (under their workspace's share). A workspace holding no child goes before
 * any that holds one, whatever its history: no workspace takes a second child while another
 * waits. Then by {@link tier}, then the turn that starts first ({@link WorkspaceUsage}), the
 * oldest of equals. A child takes a database it has open (`open`) instead when it is alike
 * (as many children held, the same tier, the same round) — at most `maxSkips` times in a row
 * past the same first one, so preference never starves it (a reopen costs a file open, WAL
 * set-up and every statement prepared again).
 */
export function fairest<T extends Waiting>(
  waiting: Iterable<T>,
  standing: (workspace: string) => Standing,
  open: (line: T) => boolean,
  maxSkips: number,
  aging: Aging,
): T | undefined {
  const seen = new Map<string, Standing>();
  const rank = (line: T): Rank => {
    let s = seen.get(line.workspace);
    if (s === undefined) seen.set(line.workspace, (s = standing(line.workspace)));
    return { busy: s.holding > 0, tier: tier(line, s, aging), start: s.start };
  };
  let first: T | undefined;
  let best: Rank | undefined;
  for (const line of waiting) {
    const r = rank(line);
    if (!best || before(r, best)) {
      first = line;
      best = r;
    }
  }
  if (!first || !best || open(first) || first.skips >= maxSkips) return first;
  for (const line of waiting) {
    if (line === first || !open(line)) continue;
    const r = rank(line);
    if (r.busy === best.busy && r.tier === best.tier && r.start < best.start + 1) {
      first.skips++;
      return line;
    }
  }
  return first;
}

interface Rank {
  busy: boolean;
  tier: number;
  start: number;
}

/** Whether `a` goes strictly before `b` (equals keep arrival order). */
function before(a: Rank, b: Rank): boolean {
  if (a.busy !== b.busy) return b.busy;
  if (a.tier !== b.tier) return a.tier < b.tier;
  return a.start < b.start;
}
