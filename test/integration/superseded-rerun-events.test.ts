import { afterEach, describe, expect, it } from 'vitest';
import { approvalIdFor, type ApprovalRequest } from '../../src/approvals/approval.ts';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AwaitingAnswer } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';

let sb: Sandbox;
afterEach(async () => {
  await sb.cleanup();
});

const who = { workspace: 'acme', agent: 'rerun', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'rerun', settings: { database: 'agent' as const } };

// An approved write whose effect changed is parked again under a new approval (round 2). A worker
// SIGKILLed after it made that record, before it marked the old one superseded, leaves the record
// and nothing else: the job's next run comes back to the same step and finds the record made.
describe('an approved call asked again, its worker killed after it made the new approval', () => {
  it('announces the old one superseded and the new one requested when the job runs again', async () => {
    sb = sandbox();
    await sb.pool();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const store = new ApprovalStore(redis, keys);
    await new MemberRegistry(redis, keys).add('acme', 'alice', 'member');
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE leads (id INTEGER PRIMARY KEY, company TEXT)' } });
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO leads VALUES (1, 'A'), (2, 'B')" } });
    const parked = (await client.call(
      { ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "DELETE FROM leads WHERE company = 'A'" } },
      { wait: false },
    )) as AwaitingAnswer;
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO leads VALUES (3, 'A')" } });

    // What the killed run left: round 2's record, as CallParking.supersede makes it.
    const old = (await store.get(parked.approval.id))!;
    const { state: _pending, ...request } = old;
    const at = Date.now();
    const next: ApprovalRequest = {
      ...request,
      id: approvalIdFor(old.callKey, 2, old.id === approvalIdFor(old.callKey, 1) ? '' : await store.epoch()),
      round: 2,
      supersedes: old.id,
      effectNote: 'made by the run that was killed',
      createdAt: at,
      expiresAt: at + sb.config.approvalTtlMs,
    };
    expect((await store.create(next)).created).toBe(true);

    const events = client.events({ from: '0' });
    expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
    const heard: string[] = [];
    for await (const e of events) {
      if (e.callId !== parked.callId || e.type === 'call.completed') continue;
      const a = e.approval as { id: string; state: string };
      heard.push(`${e.type}:${a.id === next.id ? 'round2' : 'round1'}:${a.state}`);
      if (e.type === 'approval.requested' && a.id === next.id) break;
    }
    await events.close();
    expect(heard).toEqual([
      'approval.requested:round1:pending',
      'approval.decided:round1:approved',
      'approval.decided:round1:superseded',
      'approval.requested:round2:pending',
    ]);
    // Marked right after it is announced.
    await expect.poll(async () => (await store.get(old.id))?.state).toBe('superseded');
    expect(await store.get(old.id)).toMatchObject({ supersededBy: next.id, ran: { ok: false, code: 'APPROVAL_STALE' } });
    // Nothing ran; the call waits on round 2, and runs once that is approved (round 3: the record the
    // killed run made holds the first effect, so the run asks once more about the one it has now).
    expect(await client.result(parked.callId, whoOf(parked))).toMatchObject({ status: 'awaiting_approval', approval: { id: next.id } });
    expect(await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM leads' } })).toMatchObject({
      result: { rows: [[3]] },
    });
    redis.disconnect();
  }, 30_000);
});
