/** How many of one kind of long step may be under way at once: per caller, per workspace, in the process. */
export interface SlotBounds {
  readonly perCaller: number;
  readonly perWorkspace: number;
  readonly total: number;
}

/** Which bound a step met, and how many were under way there. */
export type SlotBound = { of: 'caller' | 'workspace' | 'process'; underWay: number };

/** How many workspaces holding the most a take-back looks at for an endable slot before it refuses the asker. */
const LOOK_AT_MOST = 64;

/** A slot taken back only while idle ({@link ConcurrentSlots.takeIdle}): give it back, or say whether a step is under way on it. */
export interface IdleSlot {
  readonly release: () => void;
  readonly busy: () => void;
  readonly idle: () => void;
}

/** A slot that may be taken back: how to end its step, and how to give the slot back. */
interface Endable {
  readonly end: () => void;
  readonly release: () => void;
}

/**
 * Counts steps under way (CSV exports, downloads of offloaded results) so that no caller and no
 * workspace holds more than its bounds of what the process shares with every workspace. One per
 * process and kind of step; {@link take} gives a slot or throws what `refuse` makes of the bound met.
 *
 * The process's total is shared fairly: with it full, a workspace asking for a slot takes back the
 * oldest endable slot of the workspace holding the most, when that one holds at least two more
 * than the asker. Without it, eight workspaces whose clients read nothing held all 64 export slots
 * for as long as they liked, and every other workspace was refused (session 35, T14/T15); now
 * refusing one takes as many workspaces holding slots as the total has slots.
 */
export class ConcurrentSlots {
  private readonly byCaller = new Map<string, number>();
  private readonly byWorkspace = new Map<string, number>();
  // Each workspace's endable slots, oldest first (a Set keeps insertion order).
  private readonly endable = new Map<string, Set<Endable>>();
  /**
   * The workspaces holding slots, by how many they hold, and the most any holds: so that with the
   * total held, an asker no workspace holds two more than is refused without a walk over every
   * workspace. HTTP connections share their total this way (connection-limits.ts): a walk over
   * 4,000 addresses holding one each tripled the CPU of a connection refused at the door.
   */
  private readonly holding = new Map<number, Set<string>>();
  private most = 0;
  private all = 0;

  constructor(
    private readonly bounds: SlotBounds,
    private readonly refuse: (bound: SlotBound) => Error,
  ) {}

  /**
   * A slot for one step of `caller` in `workspace`; the function returned gives it back (once,
   * however often called). With `end`, the slot may be taken back for another workspace while the
   * process is full: it is given back first, then `end` is called (once) to stop the step.
   */
  take(workspace: string, caller: string, end?: () => void): () => void {
    return this.open(workspace, caller, end).release;
  }

  /**
   * A slot that may be taken back only while idle: `busy()` when a step starts on it (an HTTP
   * request arriving on a kept-alive connection), `idle()` when none is under way any more. Taken
   * back, the longest idle goes first. A connection cut mid-request lost its client's answer (a
   * write that may have run answered with a reset, hostile review T21, session 38): with only
   * busy slots held by the workspaces ahead, the asker is refused instead.
   */
  takeIdle(workspace: string, caller: string, end: () => void): IdleSlot {
    const { release, slot } = this.open(workspace, caller, end);
    let held = true;
    let busy = false;
    return {
      release: () => {
        held = false;
        release();
      },
      busy: () => {
        if (!held || busy || !slot) return;
        busy = true;
        const set = this.endable.get(workspace);
        set?.delete(slot);
        if (set && !set.size) this.endable.delete(workspace);
      },
      idle: () => {
        if (!held || !busy || !slot) return;
        busy = false;
        const set = this.endable.get(workspace) ?? new Set();
        set.add(slot);
        this.endable.set(workspace, set);
      },
    };
  }

  private open(workspace: string, caller: string, end?: () => void): { release: () => void; slot: Endable | undefined } {
    const callerKey = `${workspace}\n${caller}`;
    const mine = this.byCaller.get(callerKey) ?? 0;
    const ours = this.byWorkspace.get(workspace) ?? 0;
    if (mine >= this.bounds.perCaller) throw this.refuse({ of: 'caller', underWay: mine });
    if (ours >= this.bounds.perWorkspace) throw this.refuse({ of: 'workspace', underWay: ours });
    if (this.all >= this.bounds.total && !this.takeBack(ours)) throw this.refuse({ of: 'process', underWay: this.all });
    this.byCaller.set(callerKey, mine + 1);
    this.byWorkspace.set(workspace, ours + 1);
    this.moved(workspace, ours, ours + 1);
    this.all += 1;
    let held = true;
    const slot: Endable | undefined = end && { end, release: () => release() };
    if (slot) {
      const set = this.endable.get(workspace) ?? new Set();
      set.add(slot);
      this.endable.set(workspace, set);
    }
    const release = () => {
      if (!held) return;
      held = false;
      this.all -= 1;
      down(this.byCaller, callerKey);
      const had = this.byWorkspace.get(workspace) ?? 1;
      down(this.byWorkspace, workspace);
      this.moved(workspace, had, had - 1);
      const set = slot && this.endable.get(workspace);
      if (set && slot) {
        set.delete(slot);
        if (!set.size) this.endable.delete(workspace);
      }
    };
    return { release, slot };
  }

  /** Moves `workspace` from the workspaces holding `from` slots to those holding `to` (none: out of them). */
  private moved(workspace: string, from: number, to: number): void {
    const was = this.holding.get(from);
    if (was) {
      was.delete(workspace);
      if (!was.size) this.holding.delete(from);
    }
    if (to > 0) {
      const now = this.holding.get(to) ?? new Set();
      now.add(workspace);
      this.holding.set(to, now);
    }
    if (to > this.most) this.most = to;
    while (this.most > 0 && !this.holding.has(this.most)) this.most--;
  }

  /** Steps under way in the process (tests, figures). */
  get size(): number {
    return this.all;
  }

  /**
   * Ends the oldest endable slot of the workspace holding the most, if it holds at least two more
   * than `ours` (the asker's): so slots move only towards an even share, never back and forth.
   * Looks at no more than {@link LOOK_AT_MOST} workspaces: those holding only busy slots
   * ({@link takeIdle}) are passed over, and 4,096 sites holding two busy connections each made a
   * refused connection cost 140-390 µs of walk (T21, session 38).
   */
  private takeBack(ours: number): boolean {
    let most: Set<Endable> | undefined;
    let looked = 0;
    for (let held = this.most; held > ours + 1 && !most && looked < LOOK_AT_MOST; held--) {
      for (const workspace of this.holding.get(held) ?? []) {
        most = this.endable.get(workspace);
        if (most || ++looked >= LOOK_AT_MOST) break;
      }
    }
    const oldest = most?.values().next().value;
    if (!oldest) return false;
    oldest.release();
    // The step's own failure to stop must not refuse the asker: its slot is given back already.
    try {
      oldest.end();
    } catch {
      // Nothing to do: the slot is free whatever its step did.
    }
    return true;
  }
}

function down(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
