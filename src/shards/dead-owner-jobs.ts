import { QueueKeys } from 'bullmq';
import type { Redis } from 'ioredis';

// Every active job of the queue loses its lock and is marked stalled, and the stalled check's
// once-per-interval guard goes: the new worker's first stalled check (which BullMQ runs as the
// worker starts) then moves them back to wait at once. BullMQ's own check counts the move
// against maxStalledCount as for any stall.
const RELEASE = `
local active = redis.call('LRANGE', KEYS[1], 0, -1)
for _, id in ipairs(active) do
  redis.call('DEL', ARGV[1] .. id .. ':lock')
  redis.call('SADD', KEYS[2], id)
end
redis.call('DEL', KEYS[3])
return #active`;

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
  return (await redis.eval(RELEASE, 3, keys.active!, keys.stalled!, keys['stalled-check']!, keys['']!)) as number;
}
