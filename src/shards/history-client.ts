import { AgentDbError, codeOf } from '../errors.ts';
import { checkForkTarget } from '../history/fork-target.ts';
import type { HistoryView, RecentKind } from '../history/history-view.ts';
import type { ActivityEntry, ActivityPage } from '../history/activity-view.ts';
import type { BlobHoldings } from '../history/blob-holdings.ts';
import { databaseId, parseDatabaseId, shardOf } from '../contracts/database-id.ts';
import type { RestoreActor } from '../executor/executor-protocol.ts';
import type { RestoreResult } from '../history/restore-result.ts';
import { OLDER_WORKER_PAGE, RESTORE_PREVIEW_ENTRIES, refusedAfter, takenFromPage } from '../history/restore-preview.ts';
import { checkHistoryAdmin, type HistoryCaller } from '../policy/history-admin.ts';
import type { AgentRegistry } from '../registry/agents.ts';
import { RESTORE_TIMEOUT_MS } from './ops/history-ops.ts';
import type { PickupWatch, ShardOpClient } from './shard-op-client.ts';

export type { ActivityEntry, ActivityPage, HistoryCaller, HistoryView, RestoreResult };

/** A restore as asked for by the CLI or HTTP: a moment or an undo id, in place or into a new database. */
export interface RestoreRequest {
  /** ISO time, or unix seconds (a number, or a string of digits). */
  at?: string | number;
  /**
   * A history position instead of a time, kept with every commit before it: an activity entry's
   * id or a `history` commit's position (the state just after that commit), or an entry's
   * `restoreBefore` (itself the position just before that entry).
   */
  through?: string;
  /** An activity entry's id (or a `history` commit's position): the state just before that commit, undoing it and every later one. */
  before?: string;
  undo?: string;
  into?: string;
  dryRun?: boolean;
  /**
   * The bytes of restore already charged to the rate (`chargedRestore`): a restore whose plan
   * restores more whole MiB answers `unpaid` and runs nothing. Absent (the operator's): not asked.
   */
  paidBytes?: number;
  by: RestoreActor;
}

/**
 * A moment as users write it, in epoch ms: unix seconds (`1764553200`, `"1764553200.5"`) or
 * an ISO 8601 time (`2026-12-01T02:00:00Z`; one without a zone is read as UTC).
 * @throws AgentDbError INVALID_ARGUMENTS for anything else.
 */
export function parseMoment(at: string | number): number {
  if (typeof at === 'number') {
    if (!Number.isFinite(at) || at < 0) throw new AgentDbError('INVALID_ARGUMENTS', `time ${at} is not unix seconds`);
    return inDateRange(Math.round(at * 1000), at);
  }
  const text = at.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return inDateRange(Math.round(Number(text) * 1000), at);
  // Without a zone, UTC: a time after a space too (Date.parse reads "2026-12-01 02:00" in the server's zone).
  const zoned = /[zZ]|[+-]\d\d:?\d\d$/.test(text) || /^\d{4}-\d\d-\d\d$/.test(text) ? text : `${text}Z`;
  const ms = /^\d{4}-\d\d-\d\d/.test(text) ? Date.parse(zoned) : NaN;
  if (!Number.isFinite(ms))
    throw new AgentDbError('INVALID_ARGUMENTS', `time ${JSON.stringify(at)} is neither an ISO time (2026-12-01T02:00:00Z) nor unix seconds`);
  return ms;
}

/** The largest moment a JS Date holds (year 275760); past it a time is nonsense, not "later". */
const MAX_DATE_MS = 8.64e15;

/** Unix seconds past this (the year 5138) are milliseconds given by mistake, not a moment of the history. */
const MAX_PLAUSIBLE_SECONDS_MS = 1e14;

function inDateRange(ms: number, at: string | number): number {
  if (Number.isFinite(ms) && ms > MAX_PLAUSIBLE_SECONDS_MS && ms / 1000 <= MAX_DATE_MS) {
    throw new AgentDbError(
      'INVALID_ARGUMENTS',
      `time ${JSON.stringify(at)} looks like milliseconds (as seconds it is the year ${new Date(ms).getUTCFullYear()}); give unix seconds (${Math.floor(ms / 1e6)}) or an ISO time (${new Date(ms / 1000).toISOString()})`,
    );
  }
  if (!Number.isFinite(ms) || ms > MAX_DATE_MS) {
    throw new AgentDbError(
      'INVALID_ARGUMENTS',
      `time ${JSON.stringify(at)} is past any date (unix seconds up to ${MAX_DATE_MS / 1000}); give an ISO time (2026-12-01T02:00:00Z) or unix seconds`,
    );
  }
  return ms;
}

/**
 * The history and restores of a database, for the CLI and HTTP adapters: each is a shard op
 * on the shard of the database it touches (a restore `into` runs on the new database's shard).
 * Each names its caller, and refuses one the rule of `policy/history-admin.ts` refuses (history
 * and restore take a workspace admin) before anything runs.
 */
export class HistoryClient {
  constructor(
    private readonly ops: ShardOpClient,
    private readonly shardCount: number,
    /** Refuses a restore `into` the database of a registered agent (see `restore`). */
    private readonly agents?: Pick<AgentRegistry, 'get'>,
    /** For the CLI: a note, then NO_WORKER, while no worker takes the op (see `ShardOpClient.run`). */
    private readonly pickup?: PickupWatch,
  ) {}

  /**
   * What `agentdb history DB` shows. Its last commits are the users' (`commits`: `user`, the
   * default), read from the activity list: `onRead` hears how many commits and activity rows the
   * worker read afresh for them (to charge, as for a page of activity); `all` lists every commit,
   * agentdb's upkeep too, and `none` none (a caller that shows no commits reads no activity).
   * @throws AgentDbError NOT_FOUND, INVALID_ARGUMENTS, NOT_PERMITTED.
   */
  async history(db: string, caller: HistoryCaller, opts: { commits?: RecentKind; onRead?: (items: number) => void } = {}): Promise<HistoryView> {
    const id = checkedId(db);
    checkHistoryAdmin(caller, db);
    const args = opts.commits !== undefined ? { commits: opts.commits } : {};
    const { read, ...view } = (await this.answer(shardOf(id, this.shardCount), 'historyList', args, id, 60_000)) as HistoryView & { read?: number };
    opts.onRead?.(read ?? 0);
    return view;
  }

  /**
   * What `agentdb activity DB` shows: a page of the database's history as the calls that made
   * each commit, newest first. The same rule as {@link history} (a workspace admin, or an operator).
   * `onRead` hears how many commits and activity rows the worker read afresh for it (to charge).
   * @throws AgentDbError NOT_FOUND, INVALID_ARGUMENTS, NOT_PERMITTED, RESOURCE_LIMIT.
   */
  async activity(db: string, page: { limit?: number; before?: string }, caller: HistoryCaller, onRead?: (items: number) => void): Promise<ActivityPage> {
    const id = checkedId(db);
    checkHistoryAdmin(caller, db);
    const args = { ...(page.limit !== undefined ? { limit: page.limit } : {}), ...(page.before !== undefined ? { before: page.before } : {}) };
    const { read, refused, ...answer } = (await this.answer(shardOf(id, this.shardCount), 'historyActivity', args, id, 60_000)) as ActivityPage & {
      read?: number;
      refused?: { code: 'RESOURCE_LIMIT'; detail: string };
    };
    onRead?.(read ?? 0);
    if (refused) throw new AgentDbError(refused.code, refused.detail);
    return answer;
  }

  /**
   * Runs a restore and answers what it did. A dry run lists what it would take away from a page of
   * the activity list: `onRead` hears how many commits and activity rows the worker read afresh for
   * it (to charge, as for a page of activity: the page is the same read).
   * @throws AgentDbError with the registry code of any refusal.
   */
  async restore(db: string, req: RestoreRequest, caller: HistoryCaller, onRead?: (items: number) => void): Promise<RestoreResult> {
    const id = checkedId(db);
    checkHistoryAdmin(caller, db);
    if ([req.at, req.through, req.before, req.undo].filter((v) => v !== undefined).length !== 1)
      throw new AgentDbError(
        'INVALID_ARGUMENTS',
        'give exactly one of a time (`at`; --at in the CLI), a history position to keep (`through`; --through) or to go back to just before (`before`; --before), or an undo id (`undo`; --undo)',
      );
    let into: string | undefined;
    let refused: string | undefined;
    try {
      into = await this.checkedInto(id, req.into);
    } catch (err) {
      // A dry run previews the moment anyway and says why the restore itself would be refused,
      // as `--from-blob --dry-run` does: planned in place, which plans the same moment.
      if (!req.dryRun || codeOf(err) !== 'DATABASE_EXISTS') throw err;
      refused = `DATABASE_EXISTS: ${(err as AgentDbError).detail}`;
    }
    const args = {
      ...(req.at !== undefined ? { at: parseMoment(req.at) } : {}),
      ...(req.through !== undefined ? { through: req.through } : {}),
      ...(req.before !== undefined ? { before: req.before } : {}),
      ...(req.undo !== undefined ? { undo: req.undo } : {}),
      ...(into !== undefined ? { into } : {}),
      ...(req.dryRun ? { dryRun: true } : {}),
      ...(req.paidBytes !== undefined && !req.dryRun ? { paidBytes: req.paidBytes } : {}),
      by: req.by,
    };
    const out = (await this.answer(shardOf(into ?? id, this.shardCount), 'historyRestore', args, id, RESTORE_TIMEOUT_MS + 60_000)) as RestoreResult;
    // A restore done names the entry it kept as its dry run does; an undo goes back to the state
    // before a restore, not to an entry.
    const previewed =
      out.keeps === undefined || out.unpaid !== undefined
        ? out
        : out.dryRun
          ? { ...out, after: await this.takenAway(id, out.keeps, onRead) }
          : req.undo === undefined
            ? await this.withKept(id, out, out.keeps)
            : out;
    return refused ? { ...previewed, into: checkedId(req.into!), refused } : previewed;
  }

  /**
   * A restore done, with the newest activity entry it kept (`kept`), read as its dry run reads it:
   * its words then name what the dry run named (session 35, N11), and how many entries it took
   * away (`tookAway`; session 36, N13: past a page it named neither). Read after it ran, the list
   * holds the restore's own entry above what it undid (its newest restore entry: a second restore
   * of the database waits for this one's end). The read is the restore's, paid for by its charge.
   * The restore has run: a list that cannot be read, for whatever reason (a shard's owner gone
   * since), leaves the answer as it was rather than fail what was done.
   */
  private async withKept(id: string, out: RestoreResult, state: string): Promise<RestoreResult> {
    const read = await this.takenAway(id, state).catch(() => undefined);
    if (!read || read.count === undefined) return read?.kept ? { ...out, kept: read.kept } : out;
    const own = out.into === undefined ? read.entries.findIndex((e) => e.kind === 'restore') : -1;
    const tookAway =
      out.into !== undefined ? { entries: read.count } : own < 0 ? undefined : { entries: read.count - own - 1, listedBefore: read.entries[own]!.id };
    return { ...out, ...(read.kept ? { kept: read.kept } : {}), ...(tookAway ? { tookAway } : {}) };
  }

  /**
   * What a restore of `id` to history position `state` takes away (or a fork leaves out): the
   * activity list's entries after it, newest first (review low: a dry run gave only counts of
   * frames and commits), the newest `RESTORE_PREVIEW_ENTRIES` of them, how many in all, and the
   * newest entry kept. Read on the shard of the database restored from (a fork's plan runs on the
   * new database's).
   */
  private async takenAway(id: string, state: string, onRead?: (items: number) => void): Promise<NonNullable<RestoreResult['after']>> {
    type Page = Partial<ActivityPage> & { refused?: { detail: string }; read?: number };
    const ask = async (args: object) => (await this.answer(shardOf(id, this.shardCount), 'historyActivity', args, id, 60_000)) as Page;
    let page: Page;
    let older = false;
    try {
      page = await ask({ limit: RESTORE_PREVIEW_ENTRIES, after: state }).catch(async (err: unknown) => {
        // A worker not yet updated (a rolling deploy) is asked a plain page, as before `after`.
        if (!refusedAfter(err)) throw err;
        older = true;
        return ask({ limit: OLDER_WORKER_PAGE });
      });
    } catch (err) {
      // The plan stands without its list (a full disk, say, where a dry run still plans): say why.
      if (!codeOf(err)) throw err;
      return { entries: [], more: true, note: `not listed: ${codeOf(err)}: ${(err as AgentDbError).detail ?? ''}` };
    }
    onRead?.(page.read ?? 0);
    if (!page.entries || (!page.taken && !older))
      return { entries: [], more: true, note: `not listed: ${page.refused?.detail ?? 'the activity list could not be read'}` };
    const taken = page.taken
      ? { entries: page.entries, more: page.taken.count > page.entries.length, ...page.taken }
      : takenFromPage(page.entries, state, page.next !== undefined);
    // Writes still waiting for their copy to history are not in the list: say so, or it reads as complete.
    return { ...taken, ...(page.behind ? { note: page.behind.note } : {}) };
  }

  /**
   * Rebuilds `db` from the blob store alone (`agentdb restore DB --from-blob`), at `at` (default:
   * the latest moment backed up), in place of a database that does not exist here, or `into` a
   * new database of the same workspace (the same rules as {@link restore}'s).
   * @throws AgentDbError with the registry code of any refusal.
   */
  async restoreFromBlob(db: string, req: { at?: string | number; into?: string; dryRun?: boolean; by: RestoreActor }, caller: HistoryCaller): Promise<unknown> {
    const id = checkedId(db);
    checkHistoryAdmin(caller, db);
    const into = await this.checkedInto(id, req.into);
    const args = {
      ...(req.at !== undefined ? { at: parseMoment(req.at) } : {}),
      ...(into !== undefined ? { source: id } : {}),
      ...(req.dryRun ? { dryRun: true } : {}),
      by: req.by,
    };
    // A disaster restore downloads and verifies a whole generation: an hour, not a statement's time.
    return this.answer(shardOf(into ?? id, this.shardCount), 'restoreFromBlob', args, into ?? id, 3600_000);
  }

  /**
   * What the blob store the workers restore from holds (asked of shard 0's owner; every worker
   * has the same store). For an operator: the caller must be one.
   */
  async blobHoldings(caller: HistoryCaller): Promise<BlobHoldings> {
    if (caller !== 'operator') throw new AgentDbError('NOT_PERMITTED', "listing every workspace's backups is an operator's command");
    return (await this.answer(0, 'blobHoldings', {}, undefined, 600_000)) as BlobHoldings;
  }

  /** The database a restore `into` creates, checked: of the same workspace, not the source nor the shared one, no registered agent's. */
  private async checkedInto(id: string, to: string | undefined): Promise<string | undefined> {
    const into = to === undefined ? undefined : checkedId(to);
    if (into === undefined) return undefined;
    checkForkTarget(id, into);
    if (this.agents) {
      // A registered agent that never wrote has no database yet; creating it from another's
      // would hand that agent the other's private tables.
      const { workspace, agent } = parseDatabaseId(into);
      if (agent !== undefined && (await this.agents.get(workspace, agent))) {
        throw new AgentDbError(
          'DATABASE_EXISTS',
          `${into} is the database of registered agent ${agent}, which would read what is restored; restore into a name no agent has`,
        );
      }
    }
    return into;
  }

  private async answer(shard: number, op: string, args: unknown, db: string | undefined, timeoutMs: number): Promise<unknown> {
    const out = await this.ops.run(shard, op, args, { ...(db !== undefined ? { db } : {}), timeoutMs, ...(this.pickup ? { pickup: this.pickup } : {}) });
    if (!out.ok) throw new AgentDbError(out.error.code, out.error.detail);
    return out.result;
  }
}

function checkedId(id: string): string {
  const { workspace, agent } = parseDatabaseId(id);
  return databaseId(workspace, agent);
}
