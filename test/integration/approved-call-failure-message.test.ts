import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { decidedTable } from '../../src/http/web/inbox-view.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';

// An approved call that failed when it ran showed only its code ("SQL_ERROR") in the inbox's
// "ran" column and in `approvals list`: whoever approved could not see why (the table had been
// dropped meanwhile) without fetching the call's result. The record now keeps the message.
let sb: Sandbox;
let client: AgentDbClient;
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  await new MemberRegistry(redis, keysFor(sb.config.prefix)).add('acme', 'ada', 'admin');
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

it("keeps the failure's message on the approval record and shows it in the decided list", async () => {
  // A write naming a table that does not exist yet is still parked (an earlier parked CREATE may make it).
  const parked = (await client.call(
    { workspace: 'acme', agent: 'clerk', settings: { database: 'agent', approval: 'write' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'DELETE FROM leads' } },
    { wait: false },
  )) as AwaitingAnswer;
  expect(parked).toMatchObject({ status: 'awaiting_approval' });
  const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
  await client.decide(parked.approval.id, { decision: 'approve', by: 'ada', operator: true });
  expect(await waiting).toMatchObject({ ok: false, error: { code: 'SQL_ERROR', message: expect.stringContaining('No such table: leads') } });

  const store = new ApprovalStore(redis, keysFor(sb.config.prefix));
  await expect
    .poll(async () => (await store.get(parked.approval.id))?.ran)
    .toMatchObject({ ok: false, code: 'SQL_ERROR', message: expect.stringContaining('No such table: leads') });
  const record = (await store.get(parked.approval.id))!;
  // Not a refusal at release: that is what `detail` marks, and a resend would be answered from it.
  expect(record.ran?.detail).toBeUndefined();
  expect(decidedTable([record]).value).toContain('No such table: leads');
});
