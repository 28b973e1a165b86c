import { afterEach, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';

let sb: Sandbox;
afterEach(async () => {
  await sb.cleanup();
});

const who = { workspace: 'acme', agent: 'unwoken', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'unwoken', settings: { database: 'agent' as const } };

/** The event types of `callId`, from the stream's start up to its `call.completed`. */
async function eventsOf(client: AgentDbClient, callId: string): Promise<string[]> {
  const seen: string[] = [];
  for await (const e of client.events({ from: '0' })) {
    if (e.callId !== callId) continue;
    seen.push(e.type === 'approval.decided' ? `${e.type}:${String((e.approval as { state: string }).state)}` : e.type);
    if (e.type === 'call.completed') break;
  }
  return seen;
}

// The decider's first half alone (approval-transition.lua), as a process SIGKILLed, or a Redis
// killed, right after it leaves things: the decision recorded, neither announced nor its call woken.
describe('a decision whose decider died before it woke the call', () => {
  it('is announced and its call run by a worker soon after, not at the approval’s expiry; sent again it still conflicts', async () => {
    sb = sandbox({ DECISION_WAKE_AFTER_MS: '200' });
    await sb.pool();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    await new MemberRegistry(redis, keys).add('acme', 'alice', 'member');
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const parked = (await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } }, { wait: false })) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');
    expect(await new ApprovalStore(redis, keys).transition(parked.approval.id, 'approved', 'alice', 'checked', 'key')).toBe('OK');
    expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({
      ok: false,
      code: 'APPROVAL_CONFLICT',
    });

    expect(await client.result(parked.callId, { ...whoOf(parked), wait: true })).toMatchObject({ ok: true });
    expect(await eventsOf(client, parked.callId)).toEqual(['approval.requested', 'approval.decided:approved', 'call.completed']);
    expect(await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({
      result: { rows: [[1]] },
    });
    expect(await new ApprovalStore(redis, keys).get(parked.approval.id)).toMatchObject({ state: 'approved', decidedBy: 'alice', ran: { ok: true } });
    expect(await redis.zcard(keys.decisionsUndelivered)).toBe(0);
    redis.disconnect();
  }, 30_000);

  it('a rejection so left ends its call APPROVAL_REJECTED with the reason, having run nothing', async () => {
    sb = sandbox({ DECISION_WAKE_AFTER_MS: '200' });
    await sb.pool();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const parked = (await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } }, { wait: false })) as AwaitingAnswer;
    expect(await new ApprovalStore(redis, keys).transition(parked.approval.id, 'rejected', 'alice', 'wrong table', 'key')).toBe('OK');

    expect(await client.result(parked.callId, { ...whoOf(parked), wait: true })).toMatchObject({
      ok: false,
      error: { code: 'APPROVAL_REJECTED', message: expect.stringContaining('wrong table') },
    });
    expect(await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({
      result: { rows: [[0]] },
    });
    redis.disconnect();
  }, 30_000);
});
