/**
 * How much executor time a workspace had lately halves every HALF_LIFE_MS: long enough that a
 * workspace whose statements run until their deadline (10 s by default) still counts as heavy
 * while its next one waits, short enough that a burst an hour ago is forgotten.
 */
export const HALF_LIFE_MS = 30_000;
/** Below this much recent time a workspace that holds no child is forgotten. */
const FORGET_BELOW_MS = 0.5;
/** Records kept before the forgotten ones are swept out. */
const SWEEP_AT = 1024;

interface Record {
  /** Executor time charged, as it was at `at`. */
  ms: number;
  at: number;
  /** Children it holds now, and the sum of the times each was taken. */
  holding: number;
  sinceSum: number;
}

/**
 * Each workspace's children held now and executor time lately, for the pool's fair share: a
 * workspace holds at most its share of the children, and a free child goes to a waiting
 * workspace markedly lighter in recent executor time before older ones (see `fairest`) — so one
 * with next to nothing running is served at the next free child, however many others keep slow
 * statements coming. A child held counts as time passes, so a workspace is heavy while its first
 * slow statement still runs; once given back, what it spent is charged.
 *
 * Pure bookkeeping: the caller passes the time.
 */
export class WorkspaceUsage {
  private readonly byWorkspace = new Map<string, Record>();
  private sweepAt = SWEEP_AT;

  /** Children `workspace` holds now. */
  holding(workspace: string): number {
    return this.byWorkspace.get(workspace)?.holding ?? 0;
  }

  /** One of its lines took a child at `now`. */
  take(workspace: string, now: number): void {
    let r = this.byWorkspace.get(workspace);
    if (!r) {
      r = { ms: 0, at: now, holding: 0, sinceSum: 0 };
      this.byWorkspace.set(workspace, r);
    }
    r.holding++;
    r.sinceSum += now;
  }

  /**
   * A line that took a child at `since` gave it up at `now`, having spent `spentMs` of executor
   * time (the child's CPU, or a killed statement's deadline): that is charged. Wall time held
   * would also charge the time a child waited for a core, which on a busy host varies tenfold
   * between like statements.
   */
  give(workspace: string, since: number, now: number, spentMs: number): void {
    const r = this.byWorkspace.get(workspace);
    if (!r || r.holding === 0) throw new Error(`workspace ${workspace} gives up a child it does not hold`);
    r.ms = decayed(r, now) + Math.max(0, spentMs);
    r.at = now;
    r.holding--;
    r.sinceSum -= since;
    if (this.byWorkspace.size > this.sweepAt) this.sweep(now);
  }

  /** Its executor time lately, in ms, with the children it holds counted (as wall time) until `now`. */
  recent(workspace: string, now: number): number {
    const r = this.byWorkspace.get(workspace);
    if (!r) return 0;
    return decayed(r, now) + Math.max(0, r.holding * now - r.sinceSum);
  }

  /** Workspaces remembered (for tests and status). */
  get size(): number {
    return this.byWorkspace.size;
  }

  private sweep(now: number): void {
    for (const [ws, r] of this.byWorkspace) if (r.holding === 0 && decayed(r, now) < FORGET_BELOW_MS) this.byWorkspace.delete(ws);
    // Those still here are busy; sweep again only once as many more have come.
    this.sweepAt = Math.max(SWEEP_AT, this.byWorkspace.size * 2);
  }
}

function decayed(r: Record, now: number): number {
  return now <= r.at ? r.ms : r.ms * 0.5 ** ((now - r.at) / HALF_LIFE_MS);
}

/**
 * Whether a workspace with `a` ms of recent executor time is markedly lighter than one with `b`:
 * under half of it (and by more than a millisecond, so that two next to nothing are even). Only
 * a marked difference reorders the waiting: between workspaces of like load, least-first would
 * make whichever was charged a little more (a statement slowed by a busy machine) wait until
 * every other had caught up — a p99 of 10 s where oldest-first gave under 1 s.
 */
export function markedlyLighter(a: number, b: number): boolean {
  return 2 * a + 1 < b;
}

/** A waiting database, as the fair choice sees it. */
export interface Waiting {
  workspace: string;
  /** Times a free child passed it over for a database of its own. */
  skips: number;
}

/**
 * Which waiting database a free child takes. `waiting` is in arrival order and holds only
 * those allowed to run now (under their workspace's share). The oldest goes first, unless a
 * later one's workspace is markedly lighter in recent executor time (then the lightest such,
 * in the same way): a workspace with next to nothing running is served at the next free child,
 * however many heavy ones wait. A child takes a database it has open (`open`) instead when
 * that one's workspace is not markedly heavier — at most `maxSkips` times in a row past the
 * same first one, so preference never starves it.
 */
export function fairest<T extends Waiting>(
  waiting: Iterable<T>,
  recent: (workspace: string) => number,
  open: (line: T) => boolean,
  maxSkips: number,
): T | undefined {
  const use = new Map<string, number>();
  const of = (ws: string) => {
    let u = use.get(ws);
    if (u === undefined) use.set(ws, (u = recent(ws)));
    return u;
  };
  let first: T | undefined;
  let least = 0;
  for (const line of waiting) {
    const u = of(line.workspace);
    if (!first || markedlyLighter(u, least)) {
      first = line;
      least = u;
    }
  }
  if (!first || open(first) || first.skips >= maxSkips) return first;
  for (const line of waiting) {
    if (line !== first && !markedlyLighter(least, of(line.workspace)) && open(line)) {
      first.skips++;
      return line;
    }
  }
  return first;
}
