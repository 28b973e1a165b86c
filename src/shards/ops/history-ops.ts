import fs from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { AgentDbError, codeOf } from '../../errors.ts';
import { dirNames } from '../../history/dir-names.ts';
import { historyDir } from '../../history/history-files.ts';
import { checkForkTarget } from '../../history/fork-target.ts';
import { positionIn, positionToken } from '../../history/position-token.ts';
import type { RestoreResult } from '../../history/restore-result.ts';
import type { WeighedPlan, WeighingResult } from '../../history/restore-weighed.ts';
import { intoTaken } from '../../history/restore-into.ts';
import { RECENT_COMMITS, historyView, userRecentCommits } from '../../history/history-view.ts';
import { activityPage, type ActivityPage } from '../../history/activity-view.ts';
import { ActivityCache } from '../../history/activity-cache.ts';
import type { RowOrder } from '../../history/activity-rows.ts';
import type { ActivityRow } from '../../sqlite/sqlite-activity.ts';
import { WORKSPACE_FILE, databaseId, databasePath, parseDatabaseId, shardOf, sharedNote } from '../../contracts/database-id.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../../executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../policy/plan-limits.ts';
import type { ShardOpContext, ShardOpHandler } from './shard-ops.ts';
import { activityArgs, listArgs, restoreArgs } from './history-op-args.ts';
import { keptRestore } from './kept-restore.ts';

/** A restore may take this long in its executor child (a 1 GB database is copied a few times). */
export const RESTORE_TIMEOUT_MS = 30 * 60 * 1000;

/**
 * The history shard ops: `historyRestore` (in place, undo, or into a new database; it runs on
 * the shard of the database it writes), `historyList` (what `agentdb history` shows) and
 * `historySnapshot` (the nightly snapshot of every database of the shard).
 */
export function historyOpHandlers(): Record<string, ShardOpHandler> {
  // Restores running in this worker, by database: a second one of the same database is refused
  // at once instead of queueing behind the first on its line.
  const running = new Set<string>();
  // What the activity list read of each database's history, so that a page reads what changed since the last (review H29-4).
  const activityCache = new ActivityCache();

  const restore: ShardOpHandler = async (data, ctx) => {
    const parsed = restoreArgs.safeParse(data.args);
    if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', parsed.error.issues.map((i) => i.message).join('; '));
    const source = checkedId(data.db);
    const { before, ...asked } = parsed.data;
    // `before` an entry is `through` the state just before it, which its activity entry names.
    const through = before !== undefined ? await stateBefore(ctx, source, before) : asked.through;
    // A position is of the database restored from (a fork's too): one marked as another's is refused here, for every adapter.
    const args = { ...asked, ...(through !== undefined ? { through: positionIn(source, through) } : {}) };
    const writes = args.into === undefined ? source : checkedId(args.into);
    // The client checks these too, but the op is reachable by whoever can queue it: a fork
    // never leaves its workspace, nor lands on the database it is taken from or the shared one.
    if (args.into !== undefined) checkForkTarget(source, writes);
    const db = target(ctx, writes);
    const key = path.resolve(ctx.config.dataDir, source);
    if (running.has(key) || (args.into && running.has(path.resolve(ctx.config.dataDir, args.into)))) {
      throw new AgentDbError('RESTORE_RUNNING', `a restore of ${source} is already running`);
    }
    running.add(key);
    let release: (() => void) | undefined;
    try {
      const req: ExecRequest =
        args.into === undefined
          ? {
              op: 'restore',
              db,
              ...(args.at !== undefined ? { at: args.at } : {}),
              ...(args.through !== undefined ? { through: args.through } : {}),
              ...(args.undo !== undefined ? { undo: args.undo } : {}),
              dryRun: args.dryRun === true,
              by: args.by,
              timeoutMs: RESTORE_TIMEOUT_MS,
            }
          : {
              op: 'restoreInto',
              db,
              source,
              from: fileOf(ctx, source),
              ...(args.at !== undefined ? { at: args.at } : {}),
              ...(args.through !== undefined ? { through: args.through } : {}),
              dryRun: args.dryRun === true,
              by: args.by,
              ...(ctx.job.id !== undefined ? { opId: ctx.job.id } : {}),
              timeoutMs: RESTORE_TIMEOUT_MS,
            };
      let planned: RestoreResult | undefined;
      let weighed: WeighedPlan | undefined;
      let overQuota: string | undefined;
      // A name already taken is refused before the quota's plan below reads the moment, as the
      // restore itself refuses it first: planned first, a moment out of history's range answered
      // HISTORY_OUT_OF_RANGE for a restore into a database that exists (the child checks again).
      // Not on a run of the job again: the name may be taken by this op's own first run, which the
      // restore itself tells (its audit row, `opId`).
      const again = (ctx.job.attemptsStarted ?? 0) > 1;
      const taken = args.into !== undefined && args.dryRun !== true && !again ? intoTaken(db) : undefined;
      if (taken !== undefined) throw new AgentDbError('DATABASE_EXISTS', taken);
      if (ctx.quota) {
        // Before anything is copied, checked with what the workspace will hold after it: the
        // moment's size, which only the plan knows, so the child plans it first (a dry run: the
        // history brought up to date and read, nothing written). A fork is a full copy of its
        // source with its own history (the review's ten forks of a 20 MB database took 385 MB);
        // a restore in place adds about the moment's size to history each time, and history's
        // own quota lets restores through (hostile review T3). Held while it runs, so restores
        // of the workspace's other databases at once count it. A dry run answers what the
        // restore itself would: the same plan and check, `refused` instead of thrown (review N3).
        // The restore then runs the plan weighed (`weighed`), not one of its own made after it.
        // The child answers the plan with what it adds (`weighing`), which the restore then runs by.
        const { weighed: plan, ...dry } = unwrap(await ctx.executor.run({ ...req, dryRun: true, weighing: true })) as Required<
          Pick<WeighingResult, 'weighed'>
        > &
          RestoreResult;
        planned = dry;
        weighed = plan;
        const what = args.into === undefined ? `restore of ${source} in place` : `restore of ${source} into ${writes}`;
        const adds = { databases: args.into === undefined ? 0 : 1, bytes: plan.adds };
        ({ release, refused: overQuota } = await ctx.quota.holdOrRefusal(parseDatabaseId(writes).workspace, adds, what, args.dryRun === true));
      }
      // Charged before it runs by what the plan knows of its size, not after (a restore admitted
      // at a window's end spent the next window): more whole MiB than paid runs nothing.
      const mib = (bytes: number) => Math.floor(bytes / (1024 * 1024));
      if (planned && args.dryRun !== true && args.paidBytes !== undefined && mib(planned.restoredBytes) > mib(args.paidBytes))
        return { ...planned, unpaid: planned.restoredBytes };
      if (args.dryRun !== true || !planned) {
        const began = Date.now();
        const outcome = await ctx.executor.run(weighed ? { ...req, weighed } : req);
        ctx.logger.info({ db: source, into: args.into, ok: outcome.ok, dryRun: args.dryRun === true }, 'restore finished');
        planned = unwrap(outcome) as RestoreResult;
        if (args.into === undefined && args.dryRun !== true) await keptRestore(ctx, source, planned, began, args.undo);
      }
      // A dry run's state, as positions are given out: marked with the database restored from.
      const marked = planned.keeps !== undefined ? { ...planned, keeps: positionToken(source, planned.keeps) } : planned;
      return overQuota !== undefined ? { ...marked, refused: overQuota } : marked;
    } finally {
      release?.();
      running.delete(key);
    }
  };

  /**
   * A page of database `id`'s activity through the kept histories, and how many commits and rows
   * it read afresh (`read`, for the caller to charge: issue 29); refused for its size after
   * reading up to the limit, `refused` with what was read (an error would drop the count).
   */
  const activityOf = async (
    ctx: ShardOpContext,
    id: string,
    page: z.infer<typeof activityArgs>,
  ): Promise<{ page?: ActivityPage; refused?: { code: 'RESOURCE_LIMIT'; detail: string }; read: number }> => {
    const db = target(ctx, id);
    // The rows are read by the executor, the one process that opens database files (a connection
    // of this process closing last would checkpoint the WAL before capture copied it).
    const read = async (ask: { seqs?: number[]; after?: number; catchUp?: true }) => unwrap(await ctx.executor.run({ op: 'activity', db, ...ask }));
    // History copies first what failed copies left behind, if it now can: a page of an idle
    // database whose disk was freed is then not `behind` (review R29b L1).
    await read({ catchUp: true });
    let itemsRead = 0;
    try {
      const made = await activityPage(
        ctx.config.dataDir,
        id,
        {
          all: async () => (await read({})) as RowOrder[],
          some: async (seqs) => (await read({ seqs })) as ActivityRow[],
          since: async (after, limit) => (await read({ after, ...(limit !== undefined ? { limit } : {}) })) as { rows: RowOrder[]; kept: number },
        },
        { ...page, onRead: (n) => (itemsRead = n) },
        Date.now(),
        activityCache,
      );
      return { page: made, read: itemsRead };
    } catch (err) {
      if (codeOf(err) === 'RESOURCE_LIMIT') return { refused: { code: 'RESOURCE_LIMIT', detail: (err as AgentDbError).detail ?? '' }, read: itemsRead };
      throw err;
    }
  };

  /**
   * The history position just before the activity entry `entry` of database `id` (its
   * `restoreBefore`): where a restore `before` it goes. The entry's own position, given to
   * `through`, keeps it instead (session 32, N8: the two lists gave values of opposite effect to
   * the one flag).
   * @throws AgentDbError INVALID_ARGUMENTS for a position that is no entry of the list (agentdb's upkeep).
   */
  const stateBefore = async (ctx: ShardOpContext, id: string, entry: string): Promise<string> => {
    const { page, refused } = await activityOf(ctx, id, { at: entry, limit: 1 });
    if (refused) throw new AgentDbError(refused.code, refused.detail);
    const found = page?.entries[0];
    if (!found || found.id !== positionToken(id, positionIn(id, entry)))
      throw new AgentDbError(
        'INVALID_ARGUMENTS',
        `${JSON.stringify(entry)} is a commit of agentdb's own upkeep, not an entry of ${id}'s activity list: restore --before takes an entry's position (agentdb activity, agentdb history)`,
      );
    return found.restoreBefore;
  };

  const list: ShardOpHandler = async (data, ctx) => {
    const parsed = listArgs.safeParse(data.args ?? {});
    if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', parsed.error.issues.map((i) => i.message).join('; '));
    const recent = parsed.data.commits ?? 'user';
    const id = checkedId(data.db);
    const view = historyView(ctx.config.dataDir, id, ctx.config.historyRetentionDays);
    if (view.generations.length === 0 && !fs.existsSync(target(ctx, id).path)) {
      throw new AgentDbError('NOT_FOUND', `database ${id} does not exist (it was never written)${sharedNote(id)}`);
    }
    if (recent === 'all') return view;
    if (recent === 'none' || view.generations.length === 0) return { ...view, recentCommits: [] };
    // Which commits are agentdb's own upkeep (an exactly-once record's housekeeping, a decision's
    // audit row) only the activity rows tell: the users' last commits are the activity list's
    // (review low: `agentdb history` listed agentdb's bookkeeping as the last commits).
    // A history too large for the activity list, or whose rows cannot be read (a full disk where
    // the database must open to read them), still lists, as it did before it read them: without
    // its users' last commits, saying why.
    let page: ActivityPage | undefined;
    let why: string | undefined;
    let read = 0;
    try {
      const activity = await activityOf(ctx, id, { limit: RECENT_COMMITS * 2 });
      ({ page, read } = activity);
      why = activity.refused?.detail;
    } catch (err) {
      if (!codeOf(err)) throw err;
      why = `${codeOf(err)}: ${(err as AgentDbError).detail ?? ''}`;
    }
    const floor = Date.now() - ctx.config.historyRetentionDays * 24 * 3600 * 1000;
    // Writes answered ok whose frames still wait in the WAL (history's disk full) are in no
    // commit listed here: say so, as `agentdb activity` does, or the list reads as complete.
    const notes = [...(why !== undefined ? [`the last commits are not listed: ${why}`] : []), ...(page?.behind ? [page.behind.note] : [])];
    return {
      ...view,
      recentCommits: page ? userRecentCommits(page.entries, floor) : [],
      ...(notes.length ? { recentNote: notes.join('; ') } : {}),
      read,
    };
  };

  const activity: ShardOpHandler = async (data, ctx) => {
    const parsed = activityArgs.safeParse(data.args ?? {});
    if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', parsed.error.issues.map((i) => i.message).join('; '));
    const id = checkedId(data.db);
    if (!fs.existsSync(target(ctx, id).path) && !fs.existsSync(historyDir(ctx.config.dataDir, id))) {
      throw new AgentDbError('NOT_FOUND', `database ${id} does not exist (it was never written)${sharedNote(id)}`);
    }
    const { page, refused, read } = await activityOf(ctx, id, parsed.data);
    // What the page read afresh goes back with it, for the caller to charge (issue 29).
    return refused ? { refused, read } : { ...page, read };
  };

  const snapshot: ShardOpHandler = async (data, ctx) => {
    const ids = data.db ? [checkedId(data.db)] : shardDatabases(ctx.config.dataDir, ctx.shard);
    const taken: string[] = [];
    for (const id of ids) {
      if (shardOf(id, ctx.config.shardCount) !== ctx.shard) continue;
      const out = await ctx.executor.run({ op: 'snapshot', db: target(ctx, id), reason: data.db ? 'manual' : 'nightly', timeoutMs: RESTORE_TIMEOUT_MS });
      if (!out.ok) ctx.logger.warn({ db: id, code: out.error.code, detail: out.error.detail }, 'nightly snapshot failed');
      else if ((out.result as { snapshot?: string }).snapshot) taken.push(id);
    }
    return { databases: ids.length, snapshots: taken.length };
  };

  return { historyRestore: restore, historyList: list, historyActivity: activity, historySnapshot: snapshot };
}

function checkedId(id: string | undefined): string {
  if (!id) throw new AgentDbError('INVALID_ARGUMENTS', 'a database is required (<workspace> or <workspace>/<agent>)');
  const { workspace, agent } = parseDatabaseId(id);
  return databaseId(workspace, agent);
}

/** Where database `id`'s file is, whichever shard it belongs to. */
function fileOf(ctx: ShardOpContext, id: string): Pick<DbTarget, 'id' | 'path' | 'shard'> {
  const shard = shardOf(id, ctx.config.shardCount);
  const { workspace, agent } = parseDatabaseId(id);
  return { id, path: databasePath(ctx.config.dataDir, workspace, agent, shard), shard };
}

/**
 * The executor's view of database `id`, which must belong to the shard the op runs on. No agent
 * SQL runs in a restore, so the plan's limits do not apply; the largest plan's stand in.
 */
function target(ctx: ShardOpContext, id: string): DbTarget {
  const file = fileOf(ctx, id);
  if (file.shard !== ctx.shard) throw new AgentDbError('INVALID_ARGUMENTS', `database ${id} belongs to shard ${file.shard}, not ${ctx.shard}`);
  return { ...file, limits: PLAN_LIMITS.enterprise };
}

/** The databases with a file in a shard's folder. */
function shardDatabases(dataDir: string, shard: number): string[] {
  const root = path.join(dataDir, 'shards', String(shard));
  const ids: string[] = [];
  for (const workspace of dirNames(root)) {
    for (const file of dirNames(path.join(root, workspace))) {
      if (!file.endsWith('.sqlite')) continue;
      ids.push(file === WORKSPACE_FILE ? workspace : `${workspace}/${file.slice(0, -'.sqlite'.length)}`);
    }
  }
  return ids;
}

function unwrap(outcome: ExecOutcome): unknown {
  if (outcome.ok) return outcome.result;
  throw new AgentDbError(outcome.error.code, outcome.error.detail);
}
