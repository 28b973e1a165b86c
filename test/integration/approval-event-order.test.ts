import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalIdFor } from '../../src/approvals/approval.ts';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { callKeyOf } from '../../src/contracts/call-identity.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { parseEntry } from '../../src/redis/events.ts';
import type { StreamedEvent } from '../../src/redis/event-types.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// issue 27 part 7: a runtime that follows the events resumes its agent on `approval.decided`
// and takes the result from `call.completed`; the decision must come first. The decider used to
// wake the parked call and publish the decision after, so a quick call could complete first.
// Here the decider's publish is held while its call is not parked any more (woken, running or
// done) until that call has completed: with the old order that puts `call.completed` first,
// every time; announced before the wake-up, the publish finds the call still parked.
let sb: Sandbox;
let client: AgentDbClient;
let deciderRedis: Redis;
let approvals: ApprovalService;
const queues: Queue[] = [];
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };

/** Set per test: what the decider's publish waits for before it goes out. */
let beforePublish: () => Promise<void> = async () => undefined;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  deciderRedis = new Redis(REDIS_URL);
  const publish = deciderRedis.xadd.bind(deciderRedis) as (...args: unknown[]) => Promise<unknown>;
  (deciderRedis as unknown as { xadd: (...args: unknown[]) => Promise<unknown> }).xadd = async (...args: unknown[]) => {
    await beforePublish();
    return publish(...args);
  };
  const members = new MemberRegistry(deciderRedis, keysFor(sb.config.prefix));
  await members.add('acme', 'ada', 'admin');
  approvals = new ApprovalService({ redis: deciderRedis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
});

afterAll(async () => {
  await approvals.close();
  await Promise.all(queues.map((q) => q.close()));
  deciderRedis.disconnect();
  await sb.cleanup();
});

/** Parks a write and answers its approval id. */
async function park(callId: string): Promise<string> {
  const answer = await client.call({ ...who, callId, tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE ${callId} (x INTEGER)` } }, { wait: false });
  expect(answer).toMatchObject({ status: 'awaiting_approval' });
  return (answer as unknown as { approval: { id: string } }).approval.id;
}

/** Holds the decider's publish, while `callId`'s job is anything but parked, until the call has completed. */
async function holdWhileWoken(approvalId: string, callId: string): Promise<void> {
  const approval = (await approvals.get(approvalId))!;
  const queue = new Queue(keysFor(sb.config.prefix).queueName(approval.shard), { connection: { url: REDIS_URL }, prefix: sb.config.prefix });
  queues.push(queue);
  // Parked for good first: the answer comes once the call is parked, a moment before its job
  // is moved to delayed.
  await expect.poll(async () => (await Job.fromId(queue, approval.callKey))?.getState()).toBe('delayed');
  beforePublish = async () => {
    const job = await Job.fromId(queue, approval.callKey);
    if ((await job?.getState()) === 'delayed') return;
    await client.result(callId, { workspace: who.workspace, agent: who.agent, wait: true });
  };
}

/** The events of the stream about `callId`, in stream order. */
async function eventsOf(callId: string): Promise<StreamedEvent[]> {
  const raw = (await deciderRedis.xrange(keysFor(sb.config.prefix).events, '-', '+')) as [string, string[]][];
  return raw.map(parseEntry).filter((e): e is StreamedEvent => e !== undefined && e.callId === callId);
}

describe('approval.decided and the call.completed it causes', () => {
  for (const decision of ['approve', 'reject'] as const) {
    it(`publishes approval.decided first when a person decides to ${decision}`, async () => {
      const callId = `order_${decision}`;
      const id = await park(callId);
      await holdWhileWoken(id, callId);
      expect(await approvals.decideAsOperator(id, { decision, by: 'ada' })).toMatchObject({ ok: true });
      const answer = await client.result(callId, { workspace: who.workspace, agent: who.agent, wait: true });
      expect(answer).toMatchObject(decision === 'approve' ? { ok: true } : { ok: false, error: { code: 'APPROVAL_REJECTED' } });
      const types = (await eventsOf(callId)).map((e) => e.type);
      expect(types).toEqual(['approval.requested', 'approval.decided', 'call.completed']);
    });
  }

  it('keeps the order, and runs the call at once, when the decision lands while the worker is still parking it', async () => {
    beforePublish = async () => undefined;
    // Decided the moment its approval record exists: some land before the job is delayed, where
    // the worker finds the decision itself when it has parked the call.
    for (let i = 0; i < 8; i++) {
      const callId = `race_${i}`;
      const id = approvalIdFor(callKeyOf({ ...who, callId }), 1, await new ApprovalStore(deciderRedis, keysFor(sb.config.prefix)).epoch());
      const parked = client.call({ ...who, callId, tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE ${callId} (x INTEGER)` } }, { wait: false });
      await expect.poll(() => approvals.get(id), { interval: 1 }).toBeDefined();
      expect(await approvals.decideAsOperator(id, { decision: 'approve', by: 'ada' })).toMatchObject({ ok: true });
      await parked;
      // Not left parked until the approval expires: it runs now.
      expect(await client.result(callId, { workspace: who.workspace, agent: who.agent, wait: true })).toMatchObject({ ok: true });
      // (Its approval.requested may come either side of the decision: the record is listed
      // before the request is published.)
      const types = (await eventsOf(callId)).map((e) => e.type).filter((t) => t !== 'approval.requested');
      expect(types).toEqual(['approval.decided', 'call.completed']);
    }
  });
});
