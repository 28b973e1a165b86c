import { AgentDbError } from '../errors.ts';
import { ConcurrentSlots } from '../policy/concurrent-slots.ts';

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

/** RATE_LIMITED for an export whose slot was taken back for another workspace's (the process was full). */
export function exportTakenBack(table: string): ExportsBusyError {
  return new ExportsBusyError(
    `the export of ${JSON.stringify(table)} was stopped, not completed: the server was running all the CSV downloads it runs at once and gave this one's place to another workspace, yours having more under way; try again in ${EXPORT_RETRY_AFTER_S} s`,
  );
}

/** Counts exports under way; {@link take} gives a slot or refuses. One per process. */
export class ExportSlots {
  private readonly slots: ConcurrentSlots;

  constructor(bounds: ExportBounds = DEFAULT_EXPORT_BOUNDS) {
    const wait = `try again in ${EXPORT_RETRY_AFTER_S} s, once one of them has finished`;
    this.slots = new ConcurrentSlots({ perCaller: bounds.perMember, perWorkspace: bounds.perWorkspace, total: bounds.total }, ({ of, underWay }) => {
      if (of === 'caller') return new ExportsBusyError(`you already have ${downloads(underWay)} under way, the most one person may; ${wait}`);
      if (of === 'workspace') return new ExportsBusyError(`your workspace already has ${downloads(underWay)} under way, the most one workspace may; ${wait}`);
      return new ExportsBusyError(`the server has ${downloads(underWay)} under way, the most it runs at once; ${wait}`);
    });
  }

  /**
   * A slot for one export by `member` of `workspace`; the function returned gives it back (once,
   * however often it is called). With `end`, the slot may be taken back while the process is full
   * for a workspace holding at least two fewer (see ConcurrentSlots): `end` then stops the export.
   * @throws ExportsBusyError (RATE_LIMITED) past a bound, saying which.
   */
  take(workspace: string, member: string, end?: () => void): () => void {
    return this.slots.take(workspace, member, end);
  }

  /** Exports under way in the process (tests, figures). */
  get size(): number {
    return this.slots.size;
  }
}

function downloads(n: number): string {
  return n === 1 ? '1 CSV download' : `${n} CSV downloads`;
}
