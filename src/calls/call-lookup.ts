import { Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { summary } from '../approvals/approval-summary.ts';
import type { CallJobData } from '../contracts/call.ts';
import { databaseId, shardOf } from '../contracts/database-id.ts';
import type { Envelope } from '../contracts/envelope.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts } from '../redis/lua-scripts.ts';
import type { ShardQueues } from '../redis/shard-queues.ts';
import { awaiting, finishedEnvelope, type CallAnswer } from './call-answers.ts';
import { withTakenBack } from './taken-back.ts';
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
    /** The client's shard count as now known (it may be read from Redis after the client is made). */
    private readonly shardCount: () => number,
    private readonly approvals: ClientApprovals,
  ) {}

  /**
   * The call's job and the queue that holds it, or undefined when no queue does: one command
   * (`call-find.lua`), whichever shard holds it. A caller's own call id records the shard of the
   * call it was first used for, asked first; then the shards of its caller's own database and of
   * its workspace's, where calls in the default scope go; then every other shard, inside that one
   * command. Asked shard by shard, a lookup cost 17 commands for an unknown id and about 9 for a
   * generated one (bench/lookup-commands.ts).
   */
  async find(key: string): Promise<{ job: Job<CallJobData, Envelope>; queue: Queue } | undefined> {
    const jobKeys = Array.from({ length: this.shardCount() }, (_, shard) => this.queues.of(shard).toKey(key));
    const [shard, flat] = await withScripts(this.redis).agentdbCallFind(jobKeys.length + 1, this.keys.callIdClaim(key), ...jobKeys, ...this.likelyShards(key));
    if (shard < 0 || !flat) return undefined;
    const hash: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) hash[flat[i]!] = flat[i + 1]!;
    const queue = this.queues.of(shard);
    // As BullMQ's own Job.fromId builds it from the same HGETALL.
    return { job: Job.fromJSON(queue, hash as never, key) as Job<CallJobData, Envelope>, queue };
  }

  /** The shards of the databases a call key's caller reaches by default: its own, its workspace's. */
  private likelyShards(key: string): number[] {
    // A call key is `<workspace>.<agent>.<call id>`, none of which holds a dot; the agent bound to
    // its registration is `<agent>~<since>` (`callKey`): its database is the bare name's.
    const [workspace, caller] = key.split('.');
    const agent = caller?.split('~')[0];
    if (!workspace || !agent) return [];
    try {
      const shared = shardOf(databaseId(workspace), this.shardCount());
      // A member (`@name`) has no database of its own.
      return agent.startsWith('@') ? [shared] : [shardOf(databaseId(workspace, agent), this.shardCount()), shared];
    } catch {
      return [];
    }
  }

  /** The call's envelope if it has finished. */
  async finished(key: string): Promise<Envelope | undefined> {
    const found = await this.find(key);
    return found?.job.finishedOn ? this.late(found.job) : undefined;
  }

  /**
   * A finished call's envelope read after its end (a lookup, a resend): a write's says when a
   * restore in place took it back since (`taken-back.ts`), which costs one more Redis read here
   * and nothing on a call's first answer.
   */
  late(job: Job<CallJobData, Envelope>): Promise<Envelope> {
    return withTakenBack(this.redis, this.keys, job, finishedEnvelope(job));
  }

  /**
   * Where an unfinished call stands now, or its envelope if it just finished. `seen`: its job as
   * just read (by {@link find}), not read again.
   */
  async standing(key: string, queue: Queue, seen?: Job<CallJobData, Envelope>): Promise<CallAnswer | undefined> {
    const job = seen ?? (await Job.fromId<CallJobData, Envelope>(queue, key));
    if (!job) return undefined;
    if (job.finishedOn) return this.late(job);
    const { callId, tool } = job.data;
    const state = await job.getState();
    if (state === 'delayed' || state === 'active') {
      // Its approval is the one derived from its key (and round); a job's own data cannot name another.
      const approval = await this.approvals.approvals().current(key);
      // Active with its approval pending: being parked (the approval is announced before the job
      // is delayed), so a lookup right after `?wait=false` answered does not say it runs.
      if (approval?.callKey === key && (state === 'delayed' || approval.state === 'pending')) return awaiting(callId, tool, summary(approval));
    }
    return { ok: false, callId, tool, status: state === 'active' ? 'running' : 'queued' };
  }
}
