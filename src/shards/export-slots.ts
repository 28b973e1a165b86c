import { AgentDbError } from '../errors.ts';

/**
 * CSV exports under way at once, per member, per workspace and in the process. Each export holds
 * up to three chunks (one being sent, two asked for ahead, 2 MiB of text each) in the HTTP
 * process for as long as its download lasts: in review R1, 30 exports at once from one member
 * took that process from 357 to 450 MB of RSS, and one address may hold 256 connections. The
 * process is shared by every workspace, so one member or one workspace may not grow it past a
 * few exports; a person downloading a table or two never meets these bounds.
 */
export interface ExportBounds {
  readonly perMember: number;
  readonly perWorkspace: number;
  readonly total: number;
}

/** EXPORTS_PER_MEMBER, EXPORTS_PER_WORKSPACE, EXPORTS_MAX. */
export const DEFAULT_EXPORT_BOUNDS: ExportBounds = { perMember: 4, perWorkspace: 8, total: 64 };

/**
 * Seconds a refused export is told to wait (Retry-After): a slot comes back when another export
 * ends, which nothing here can foresee; a few seconds is about the length of a small download.
 */
export const EXPORT_RETRY_AFTER_S = 5;

/** RATE_LIMITED for an export past a bound, with the seconds to wait (HTTP's Retry-After). */
export class ExportsBusyError extends AgentDbError {
  constructor(detail: string) {
    super('RATE_LIMITED', detail, { retryAfter: EXPORT_RETRY_AFTER_S });
  }
}

/** Counts exports under way; {@link take} gives a slot or refuses. One per process. */
export class ExportSlots {
  private readonly byMember = new Map<string, number>();
  private readonly byWorkspace = new Map<string, number>();
  private all = 0;

  constructor(private readonly bounds: ExportBounds = DEFAULT_EXPORT_BOUNDS) {}

  /**
   * A slot for one export by `member` of `workspace`; the function returned gives it back (once,
   * however often it is called).
   * @throws ExportsBusyError (RATE_LIMITED) past a bound, saying which.
   */
  take(workspace: string, member: string): () => void {
    const memberKey = `${workspace}\n${member}`;
    const mine = this.byMember.get(memberKey) ?? 0;
    const ours = this.byWorkspace.get(workspace) ?? 0;
    const wait = `try again in ${EXPORT_RETRY_AFTER_S} s, once one of them has finished`;
    if (mine >= this.bounds.perMember) throw new ExportsBusyError(`you already have ${downloads(mine)} under way, the most one person may; ${wait}`);
    if (ours >= this.bounds.perWorkspace)
      throw new ExportsBusyError(`your workspace already has ${downloads(ours)} under way, the most one workspace may; ${wait}`);
    if (this.all >= this.bounds.total) throw new ExportsBusyError(`the server has ${downloads(this.all)} under way, the most it runs at once; ${wait}`);
    this.byMember.set(memberKey, mine + 1);
    this.byWorkspace.set(workspace, ours + 1);
    this.all += 1;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.all -= 1;
      down(this.byMember, memberKey);
      down(this.byWorkspace, workspace);
    };
  }

  /** Exports under way in the process (tests, figures). */
  get size(): number {
    return this.all;
  }
}

function down(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

function downloads(n: number): string {
  return n === 1 ? '1 CSV download' : `${n} CSV downloads`;
}
