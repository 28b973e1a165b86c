import { QueueKeys } from 'bullmq';
import type { Redis } from 'ioredis';
import { withScripts } from '../redis/lua-scripts.ts';

/**
 * Hands the jobs a shard's previous owner held back to the queue, for the owner that has just
 * taken the shard, before its worker starts. Only the lease holder runs a shard's jobs, and the
 * lease passes only once the old owner has lost it (it lapsed, or the owner was found dead):
 * every job still active then is one nobody is running, or one the old owner lets go of as
 * soon as it sees its lease gone (it stops its worker at once). Waiting for their 30 s locks
 * instead answered calls in flight at a service kill up to 40.6 s after it, and lowering
 * LOCK_DURATION_MS would make every live job's lock renew more often and a long event-loop
 * pause run a job twice. A job run again is safe: a write finds its recorded call id.
 * @returns how many jobs were handed back.
 */
export async function releaseDeadOwnerJobs(redis: Redis, bullPrefix: string, queueName: string): Promise<number> {
  const keys = new QueueKeys(bullPrefix).getKeys(queueName);
  // release-dead-owner-jobs.lua: every active job loses its lock and is marked stalled, and the
  // stalled check's once-per-interval guard goes, so the new worker's first check (as it starts)
  // moves them back to wait at once, counted against maxStalledCount as any stall.
  return withScripts(redis).agentdbReleaseDeadOwnerJobs(keys.active!, keys.stalled!, keys['stalled-check']!, keys['']!);
}
