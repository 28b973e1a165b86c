import { createHash } from 'node:crypto';
import type { ExecRequest } from './executor-protocol.ts';

/** Statements remembered (per workspace and statement text); past it the least recently run go first. */
const STATEMENT_RECORDS = 20_000;
/** Workspaces kept out of the lane at once; past it the oldest bans lapse early. */
const BANS = 20_000;
/**
 * How long a workspace whose statement ran long in the lane stays out of it. Ten minutes, as
 * long as `WorkspaceUsage` remembers an idle workspace: rotating workspaces that each warm up
 * and then send a runaway get the lane once each per ten minutes, not once per deadline.
 */
export const LANE_BAN_MS = 10 * 60_000;

/**
 * The statement a request runs, as the lane remembers it: the workspace, the op and a digest of
 * the SQL text (parameters apart), or undefined for a request the lane never takes (restores,
 * snapshots, browsing, record lookups: work whose cost the statement text does not tell).
 */
export function statementKey(workspace: string, req: ExecRequest): string | undefined {
  // Restoring a moment for a read of the past: a restore's work, whatever the statement's text.
  if ((req.op === 'describe' || req.op === 'query') && req.asOf?.build) return undefined;
  if (req.op === 'describe') return `${workspace}\0describe`;
  if (req.op !== 'query' && req.op !== 'write') return undefined;
  // A digest of a long text: a record is at most a hundred-odd bytes whatever the SQL's length.
  // A short one is its own key: hashing it cost the worker more than the rest of the lane's
  // bookkeeping on every statement (a SHA-1 object made and digested, ~10 µs; issue 31).
  const sql = req.sql.length <= SHORT_SQL ? `t${req.sql}` : `h${createHash('sha1').update(req.sql).digest('base64')}`;
  return `${workspace}\0${req.op}\0${sql}`;
}

/** SQL texts up to this length (chars) key a statement as they are; longer ones by their digest. */
const SHORT_SQL = 100;

/**
 * Whether the lane is open now: every pooled child runs a statement that has run at least
 * `longMs` (`runningMs` is each pooled child's head statement's time so far, undefined for an
 * idle child; a child starting or down counts as busy). Returns true, or false and when (ms from
 * now) it would open if nothing changes, or undefined when only an event can open it (a child
 * is idle: the pool serves the waiting lines from it).
 */
export function laneOpens(runningMs: (number | 'down' | undefined)[], longMs: number): { open: true } | { open: false; inMs?: number } {
  let inMs = 0;
  for (const ms of runningMs) {
    if (ms === 'down') continue;
    if (ms === undefined) return { open: false };
    inMs = Math.max(inMs, longMs - ms);
  }
  return inMs <= 0 ? { open: true } : { open: false, inMs };
}

/**
 * The overflow lane's record: which statements of which workspace are known to finish quickly,
 * and which workspaces lost the lane for a while. Pure bookkeeping: the pool passes the time.
 *
 * Why a lane (a child beyond the pool, taken only while every pooled child runs a long
 * statement) and why by statement: a cheap read cannot be told from a runaway before it runs,
 * and without killing a statement before its deadline the only way to serve it while runaways
 * hold every child is another child. Taken by whatever waits, that child would go to the next
 * runaway; taken by workspaces whose statements were cheap (the pool's own rule), it went to
 * workspaces that first ran cheap reads and then each sent one runaway, in turn with the quiet
 * workspace. So it takes only a statement its workspace has run before, and that then finished
 * under `longMs`: a quiet workspace's usual reads. A workspace that warmed up a statement it
 * then makes run long (a parameter bound) gets the lane once: that statement, and the whole
 * workspace for {@link LANE_BAN_MS}, lose it.
 */
export class OverflowLane {
  /** Statement key → whether its last run finished under `longMs`; in order of last run. */
  private readonly statements = new Map<string, boolean>();
  /** Workspace → until when it stays out of the lane; in order of banning, which is the order they end. */
  private readonly bans = new Map<string, number>();

  /** @param longMs what counts as a long statement (EXECUTOR_LONG_MS) */
  constructor(private readonly longMs: number) {}

  /** Whether `req` of `workspace` may run in the lane at `now`. */
  admits(workspace: string, req: ExecRequest, now: number): boolean {
    const until = this.bans.get(workspace);
    if (until !== undefined) {
      if (until > now) return false;
      this.bans.delete(workspace);
    }
    const key = statementKey(workspace, req);
    return key !== undefined && this.statements.get(key) === true;
  }

  /** A statement of `workspace` ended (answered, or killed at its deadline) after `ms` of executor time. */
  ran(workspace: string, req: ExecRequest, ms: number): void {
    const key = statementKey(workspace, req);
    if (key === undefined) return;
    this.statements.delete(key);
    this.statements.set(key, ms < this.longMs);
    if (this.statements.size > STATEMENT_RECORDS) this.statements.delete(this.statements.keys().next().value!);
  }

  /**
   * A lane run of `workspace` ended, having cost `spentMs` of executor time (the child's CPU, or
   * the deadline when killed there): past `longMs`, the workspace loses the lane for a while.
   * Executor time, not the time it held the child: on a loaded host a cheap read waited for a
   * core past `longMs` now and then, and the quiet workspace lost the lane it is there for.
   */
  laneRan(workspace: string, spentMs: number, now: number): 'short' | 'long' {
    if (spentMs < this.longMs) return 'short';
    this.bans.delete(workspace);
    this.bans.set(workspace, now + LANE_BAN_MS);
    this.sweep(now);
    return 'long';
  }

  /** Statements and bans remembered (for tests). */
  get size(): { statements: number; bans: number } {
    return { statements: this.statements.size, bans: this.bans.size };
  }

  /** Bans are kept in the order they end (each lasts as long), so the ended and the oldest are at the front. */
  private sweep(now: number): void {
    for (const [ws, until] of this.bans) {
      if (until > now && this.bans.size <= BANS) break;
      this.bans.delete(ws);
    }
  }
}
