import { afterEach, describe, expect, it } from 'vitest';
import { Job } from 'bullmq';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AwaitingAnswer } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardQueues } from '../../src/redis/shard-queues.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
afterEach(async () => {
  await sb.cleanup();
});

const who = { workspace: 'acme', agent: 'unannounced', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'unannounced', settings: { database: 'agent' as const } };

// A worker SIGKILLed after it made a parked call's approval and before it announced it leaves the
// record and no `approval.requested`: what is made here by taking the event (and its mark) away.
// The job's next run (its lock lapsed) finds the approval pending, as a woken job does.
describe('a parked call whose approval was made but never announced', () => {
  it('is announced when its job runs again, so a runtime following the events is asked', async () => {
    sb = sandbox();
    await sb.pool();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const parked = (await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } }, { wait: false })) as AwaitingAnswer;
    const requested = async () => {
      const entries = await redis.xrange(keys.events, '-', '+');
      return entries.filter(([, fields]) => fields.join(' ').includes('approval.requested') && fields.join(' ').includes(parked.approval.id));
    };
    const [[eventId]] = (await requested()) as [[string, string[]]];
    await redis.xdel(keys.events, eventId);
    await redis.hdel(keys.approval(parked.approval.id), 'requested');

    const queues = new ShardQueues(redis, keys);
    const approval = (await new ApprovalStore(redis, keys).get(parked.approval.id))!;
    const job = await Job.fromId(queues.of(approval.shard), approval.callKey);
    // The original event is gone: the only one the stream can hold for the call is a new one.
    const events = client.events({ from: '0' });
    await job!.promote();
    for await (const e of events) {
      if (e.callId === parked.callId && e.type === 'approval.requested') {
        expect(e.approval).toMatchObject({ id: parked.approval.id, state: 'pending' });
        break;
      }
    }
    await events.close();
    expect(await redis.hexists(keys.approval(parked.approval.id), 'requested')).toBe(1);
    // Still parked: nothing ran.
    expect(await client.result(parked.callId, { workspace: 'acme', agent: 'unannounced' })).toMatchObject({ status: 'awaiting_approval' });
    await queues.close();
    redis.disconnect();
  }, 30_000);
});
