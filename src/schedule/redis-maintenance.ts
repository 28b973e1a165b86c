import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { meterDay } from '../calls/usage.ts';
import { ShardQueues } from '../redis/shard-queues.ts';

/** What one maintenance run removed. */
export interface PruneReport {
  usageDays: number;
  approvals: number;
}

const DAY_MS = 24 * 3600 * 1000;

/**
 * Removes what agentdb keeps in Redis past its retention: metered usage days older than
 * `usageDays`, and finished approvals older than `approvalDays` (never a pending one; each
 * database keeps its own audit of decisions, which backups carry).
 */
export async function pruneRedis(redis: Redis, keys: Keys, opts: { now: number; usageDays: number; approvalDays: number }): Promise<PruneReport> {
  const oldestDay = meterDay(opts.now - opts.usageDays * DAY_MS);
  let usageDays = 0;
  for (const member of await redis.smembers(keys.usageIndex)) {
    const sep = member.lastIndexOf('|');
    const workspace = member.slice(0, sep);
    const day = member.slice(sep + 1);
    if (day >= oldestDay) continue;
    await redis.multi().del(keys.usage(workspace, day)).srem(keys.usageIndex, member).exec();
    usageDays++;
  }

  let approvals = 0;
  const cutoff = opts.now - opts.approvalDays * DAY_MS;
  for (;;) {
    const ids = await redis.zrangebyscore(keys.approvalsAll, '-inf', cutoff, 'LIMIT', 0, 500);
    if (ids.length === 0) break;
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hmget(keys.approval(id), 'state', 'workspace');
    const rows = ((await pipeline.exec()) ?? []).map(([, fields]) => (fields ?? []) as (string | null)[]);
    const tx = redis.multi();
    let done = 0;
    ids.forEach((id, i) => {
      const [state, workspace] = rows[i] ?? [];
      // The workspace's index of all mirrors the service's, which every one of them leaves.
      if (workspace) tx.zrem(keys.approvalsAllOf(workspace), id);
      if (state === 'pending') return;
      done++;
      tx.del(keys.approval(id));
      // The workspace's other indexes (its inbox's and its pending list's) let the record go with it.
      if (workspace) tx.zrem(keys.approvalsDecidedOf(workspace), id).zrem(keys.approvalsPendingOf(workspace), id).zrem(keys.approvalsExpiringOf(workspace), id);
    });
    // Pending ones stay listed in the pending indexes; only their place in the all-time ones goes.
    tx.zrem(keys.approvalsAll, ...ids);
    await tx.exec();
    approvals += done;
  }
  return { usageDays, approvals };
}

/**
 * Removes the finished jobs (calls and their envelopes) of every shard queue that finished before
 * `cutoff` (ms): RESULT_TTL_HOURS ago, and the queue's events from before it. BullMQ removes a
 * finished job by age only when another job of its queue finishes, so on a shard nobody calls any
 * more a workspace's jobs stayed past RESULT_TTL_HOURS, after its Redis budget had let them go
 * (hostile review of issue 27). Run every RESULT_TRIM_EVERY_S. Answers how many jobs it removed.
 */
export async function pruneFinishedJobs(redis: Redis, keys: Keys, opts: { shardCount: number; cutoff: number }): Promise<number> {
  const queues = new ShardQueues(redis, keys);
  // BullMQ's clean takes a grace before its own clock: the cutoff as a grace from now.
  const grace = Date.now() - opts.cutoff;
  let removed = 0;
  try {
    for (let shard = 0; shard < opts.shardCount; shard++) {
      const queue = queues.of(shard);
      removed += (await queue.clean(grace, 0, 'completed')).length;
      removed += (await queue.clean(grace, 0, 'failed')).length;
      // BullMQ's `completed` events carry the envelope too and are trimmed by count only (1,000
      // a shard): on a quiet shard they outlived the job and the workspace budget's count of
      // them. Stream ids begin with their time in ms, so MINID drops those before the cutoff.
      await redis.xtrim(queue.keys.events, 'MINID', String(Math.floor(opts.cutoff)));
    }
  } finally {
    await queues.close();
  }
  return removed;
}
