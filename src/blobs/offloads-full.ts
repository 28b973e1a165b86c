/**
 * How long, at most, a workspace whose offloaded results were found at their quota
 * (MAX_OFFLOADED_BYTES_PER_WORKSPACE) has its queries run without a spill file. Room comes back
 * only as its oldest result expires (and the nightly prune deletes it, a day later), so a minute
 * is rarely early, and a workspace given room back waits at most this long to use it.
 */
export const FULL_REMEMBERED_MS = 60_000;

/** Workspaces remembered at once; past it, those whose stretch ended are forgotten first. */
const MAX_REMEMBERED = 10_000;

/**
 * The workspaces whose offloaded results were refused room, remembered for a while. A query
 * past the envelope's size writes its whole result to a file under the data folder (up to
 * MAX_OFFLOAD_BYTES, 64 MB) before the quota is asked: a workspace at its quota wrote that file
 * and deleted it again on every such query, each metered as a plain query, on the disk every
 * workspace shares (hostile review T14: 67 MB a query, 10 in 11 s). Now the first refusal is
 * remembered and the workspace's next queries, for {@link FULL_REMEMBERED_MS} or until the room
 * comes back if sooner, are cut to the envelope without a file, saying why.
 */
export class OffloadsFull {
  private readonly full = new Map<string, { until: number; detail: string }>();

  /** The quota refused `workspace` room (`detail` says so), until `freesAt` (ms) at the latest. */
  refused(workspace: string, detail: string, freesAt: number | undefined, now: number): void {
    if (this.full.size >= MAX_REMEMBERED) for (const [w, e] of this.full) if (e.until <= now) this.full.delete(w);
    if (this.full.size >= MAX_REMEMBERED) return;
    this.full.set(workspace, { until: Math.min(now + FULL_REMEMBERED_MS, freesAt ?? Number.POSITIVE_INFINITY), detail });
  }

  /** Why `workspace`'s queries are not offloaded now, or undefined when they may be. */
  refusal(workspace: string, now: number): string | undefined {
    const e = this.full.get(workspace);
    if (e === undefined) return undefined;
    if (e.until > now) return e.detail;
    this.full.delete(workspace);
    return undefined;
  }
}
