import { afterAll, describe, expect, it } from 'vitest';
import { Job } from 'bullmq';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AwaitingAnswer } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardQueues } from '../../src/redis/shard-queues.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { pastMs } from '../helpers/history.ts';
import { whoOf } from '../helpers/who.ts';

let sb: Sandbox;
let ops: ShardOpClient;
afterAll(async () => {
  await ops?.close();
  await sb?.cleanup();
});
const by = { who: 'operator:test', via: 'operator' as const };
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };

// An approved write committed; its call's result then left Redis (RESULT_TTL_HOURS: the job is
// removed here), and the agent sends the call again under its id. Its approval, kept longer, says it
// ran: the run replays the database's record of it. A restore in place to before that commit took
// the record too, and the resend committed the write a second time under the one approval.
describe('an approved call sent again after its result left Redis', () => {
  it('replays its committed run, and after a restore to before that run, runs nothing: APPROVAL_STALE', async () => {
    sb = sandbox({ HISTORY_CAPTURE: 'on' });
    await sb.pool();
    ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
    const history = new HistoryClient(ops, sb.config.shardCount);
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const store = new ApprovalStore(redis, keys);
    const queues = new ShardQueues(redis, keys);
    await new MemberRegistry(redis, keys).add('acme', 'alice', 'member');
    const client = sb.client();
    const rows = async () => {
      const a = await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT x FROM t ORDER BY x' } });
      return a.ok ? (a.result as { rows: unknown[] }).rows : a;
    };
    /** Parks `x`'s insert under call id `id`, approves it, awaits its run and removes its job, as its result's expiry does. */
    const approvedThenForgotten = async (id: string, x: number) => {
      const call = { ...who, callId: id, tool: 'DATA_WRITE_SQL' as const, arguments: { sql: 'INSERT INTO t VALUES (?)', params: [x] } };
      const parked = (await client.call(call, { wait: false })) as AwaitingAnswer;
      expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
      expect(await client.result(id, { ...whoOf(parked), wait: true })).toMatchObject({ ok: true, result: { changes: 1 } });
      const approval = (await store.get(parked.approval.id))!;
      await (await Job.fromId(queues.of(approval.shard), approval.callKey))!.remove();
      return { call, approval };
    };
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });

    const kept = await approvedThenForgotten('kept', 1);
    expect(await client.call(kept.call)).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await rows()).toEqual([[1]]);

    const before = Date.now();
    pastMs(before);
    const undone = await approvedThenForgotten('undone', 2);
    expect(await rows()).toEqual([[1], [2]]);
    await history.restore('acme/scout', { at: new Date(before).toISOString(), by }, 'operator');
    expect(await rows()).toEqual([[1]]);
    expect(await client.call(undone.call)).toMatchObject({
      ok: false,
      error: { code: 'APPROVAL_STALE', message: expect.stringContaining('no longer holds that run') },
    });
    expect(await rows()).toEqual([[1]]);
    expect(await store.get(undone.approval.id)).toMatchObject({ state: 'approved', ran: { ok: true } });
    await queues.close();
    redis.disconnect();
  }, 60_000);
});
