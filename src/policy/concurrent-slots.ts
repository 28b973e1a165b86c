/** How many of one kind of long step may be under way at once: per caller, per workspace, in the process. */
export interface SlotBounds {
  readonly perCaller: number;
  readonly perWorkspace: number;
  readonly total: number;
}

/** Which bound a step met, and how many were under way there. */
export type SlotBound = { of: 'caller' | 'workspace' | 'process'; underWay: number };

/**
 * Counts steps under way (CSV exports, downloads of offloaded results) so that no caller and no
 * workspace holds more than its bounds of what the process shares with every workspace. One per
 * process and kind of step; {@link take} gives a slot or throws what `refuse` makes of the bound met.
 */
export class ConcurrentSlots {
  private readonly byCaller = new Map<string, number>();
  private readonly byWorkspace = new Map<string, number>();
  private all = 0;

  constructor(
    private readonly bounds: SlotBounds,
    private readonly refuse: (bound: SlotBound) => Error,
  ) {}

  /** A slot for one step of `caller` in `workspace`; the function returned gives it back (once, however often called). */
  take(workspace: string, caller: string): () => void {
    const callerKey = `${workspace}\n${caller}`;
    const mine = this.byCaller.get(callerKey) ?? 0;
    const ours = this.byWorkspace.get(workspace) ?? 0;
    if (mine >= this.bounds.perCaller) throw this.refuse({ of: 'caller', underWay: mine });
    if (ours >= this.bounds.perWorkspace) throw this.refuse({ of: 'workspace', underWay: ours });
    if (this.all >= this.bounds.total) throw this.refuse({ of: 'process', underWay: this.all });
    this.byCaller.set(callerKey, mine + 1);
    this.byWorkspace.set(workspace, ours + 1);
    this.all += 1;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.all -= 1;
      down(this.byCaller, callerKey);
      down(this.byWorkspace, workspace);
    };
  }

  /** Steps under way in the process (tests, figures). */
  get size(): number {
    return this.all;
  }
}

function down(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
