import fs from 'node:fs';
import { AgentDbError } from '../errors.ts';
import type { RestorePlan } from './restore-plan.ts';
import type { RestoreResult } from './restore-result.ts';
import { restoreAdds } from './restore-room.ts';

/**
 * The plan a restore was weighed by against its workspace's disk quota: its dry run's plan and
 * the database's size then (`RestoreResult.bytesBefore`, in place; 0 for a fork). The worker asks
 * the child for it (`weighing`), holds the room it adds, then hands it to the restore itself
 * (`weighed`), which runs this plan instead of planning again: the moment restored is the one
 * weighed, whatever was written in between, and the history is read and planned once (session
 * 29, L3: twice before, and what the second plan added was never weighed).
 */
export interface WeighedPlan {
  plan: RestorePlan;
  bytesBefore: number;
  /** What it adds to the workspace's disk (`restoreAdds`): the room the worker holds, and the most the restore may add. */
  adds: number;
  /** Planned from the history copied so far (a dry run on a full disk, its `note`): the restore plans again once it copied the rest. */
  partial?: true;
}

/** A dry run's answer to the worker, with the plan it weighs (`weighing`); the worker keeps `weighed` to itself. */
export type WeighingResult = RestoreResult & { weighed?: WeighedPlan };

/**
 * A dry run's plan, weighed: what it adds, computed here once, for the worker to hold and the
 * restore to run by.
 * @param bytesBefore in place, the database's pages now in bytes; undefined for a restore into a new database.
 * @param partial planned from the history copied so far (the dry run's `note`).
 */
export function weighing(plan: RestorePlan, bytesBefore: number | undefined, partial: boolean): WeighedPlan {
  return { plan, bytesBefore: bytesBefore ?? 0, adds: restoreAdds(plan, bytesBefore), ...(partial ? { partial: true as const } : {}) };
}

/**
 * The weighed plan, for the restore to run, once it still holds (a partial one planned again,
 * by `replan`). Its snapshot and segments must still be there: the prune may have taken the
 * generation between the plan and the run (the restore's reader marker keeps them from here on).
 * And the restore must add no more than was weighed: a restore in place adds less the larger the
 * file it replaces, so one shrunk meanwhile (a VACUUM from outside agentdb: agents cannot) would
 * add more than the quota weighed and held, as would a partial plan's moment grown once the rest
 * of history was copied. Refused then, never run unweighed: sent again, it is weighed anew.
 * @param bytesNow in place, the database's pages now in bytes; undefined for a restore into a new database.
 * @throws AgentDbError HISTORY_OUT_OF_RANGE when the plan's history was pruned since.
 * @throws AgentDbError QUOTA_EXCEEDED when the restore would now add more than was weighed.
 */
export function weighedPlan(weighed: WeighedPlan, bytesNow: number | undefined, what: string, replan: () => RestorePlan): RestorePlan {
  const plan = weighed.partial ? replan() : weighed.plan;
  if (![plan.snapshotPath, ...plan.segments.map((s) => s.dataPath)].every((file) => fs.existsSync(file))) {
    throw new AgentDbError(
      'HISTORY_OUT_OF_RANGE',
      `generation ${plan.generation} left the history (pruned) after the ${what} was planned; nothing was restored`,
    );
  }
  const adds = restoreAdds(plan, bytesNow);
  const weighedAdds = weighed.adds;
  // One that still frees bytes passes any quota.
  if (adds > weighedAdds && adds > 0) {
    const why =
      bytesNow !== undefined && bytesNow < weighed.bytesBefore
        ? `the database shrank from ${weighed.bytesBefore} to ${bytesNow} bytes`
        : 'its moment was planned on a full disk from the history copied so far, and is larger with the rest';
    throw new AgentDbError(
      'QUOTA_EXCEEDED',
      `${what} refused: ${why} after the restore was weighed against the workspace's disk quota, so it would add about ${adds} bytes, more than the ${weighedAdds} weighed; nothing was restored (sent again, it is weighed anew)`,
    );
  }
  return plan;
}
