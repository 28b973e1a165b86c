import { Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { summary } from '../approvals/approval-service.ts';
import type { CallJobData } from '../contracts/call.ts';
import type { Envelope } from '../contracts/envelope.ts';
import type { Keys } from '../redis/keys.ts';
import type { ShardQueues } from '../redis/shard-queues.ts';
import { awaiting, finishedEnvelope, type CallAnswer } from './call-answers.ts';
import { parseClaim } from './call-id-claim.ts';
import type { ClientApprovals } from './client-approvals.ts';

/**
 * Finds a call by its call key: its job (on whichever shard queue holds it), its envelope once
 * finished, or where it stands while not.
 */
export class CallLookup {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly queues: ShardQueues,
    private readonly shardCount: number,
    private readonly approvals: ClientApprovals,
  ) {}

  /** The call's job and the queue that holds it, or undefined when no queue does. */
  async find(key: string): Promise<{ job: Job<CallJobData, Envelope>; queue: Queue } | undefined> {
    // A caller's own call id records the shard of the call it was first used for.
    const claimed = parseClaim(await this.redis.get(this.keys.callIdClaim(key)));
    if (claimed && claimed.shard < this.shardCount) {
      const queue = this.queues.of(claimed.shard);
      const job = await Job.fromId<CallJobData, Envelope>(queue, key);
      if (job) return { job, queue };
    }
    // Otherwise (a generated id, a call made before ids were recorded) the call's key does not
    // name its shard (its database does); a lookup by id is rare enough to ask every queue.
    for (let shard = 0; shard < this.shardCount; shard++) {
      const queue = this.queues.of(shard);
      const job = await Job.fromId<CallJobData, Envelope>(queue, key);
      if (job) return { job, queue };
    }
    return undefined;
  }

  /** The call's envelope if it has finished. */
  async finished(key: string): Promise<Envelope | undefined> {
    const found = await this.find(key);
    return found?.job.finishedOn ? finishedEnvelope(found.job) : undefined;
  }

  /** Where an unfinished call stands now, or its envelope if it just finished. */
  async standing(key: string, queue: Queue): Promise<CallAnswer | undefined> {
    const job = await Job.fromId<CallJobData, Envelope>(queue, key);
    if (!job) return undefined;
    if (job.finishedOn) return finishedEnvelope(job);
    const { callId, tool } = job.data;
    const state = await job.getState();
    if (state === 'delayed') {
      // Its approval is the one derived from its key (and round); a job's own data cannot name another.
      const approval = await this.approvals.approvals().current(key);
      if (approval?.callKey === key) return awaiting(callId, tool, summary(approval));
    }
    return { ok: false, callId, tool, status: state === 'active' ? 'running' : 'queued' };
  }
}
