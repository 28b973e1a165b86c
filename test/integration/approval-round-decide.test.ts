import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ApprovalRequest } from '../../src/approvals/approval.ts';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 37, R12: `agentdb approvals approve <call id>` resolved the call id to the call's pending
// approval, whatever its round. Two people read round 1 of call `c1` (`approvals show c1`); alice
// approves it, its data changed meanwhile, so nothing commits and it is asked again as round 2,
// with another effect; bob, who read round 1, types `approvals approve c1` and approved round 2,
// which he never saw (where without round 2 he would have been told APPROVAL_CONFLICT). A decision
// by call id that lands on a later round is now refused with APPROVAL_CONFLICT naming the new id.

let sb: Sandbox;
let redis: Redis;
let store: ApprovalStore;
let service: ApprovalService;
const T0 = Date.now();

function request(id: string, agent: string, callId: string, createdAt: number): ApprovalRequest {
  return {
    id,
    callId,
    callKey: `acme\n${agent}\n${callId}`,
    digest: 'd',
    shard: 0,
    workspace: 'acme',
    agent,
    tool: 'DATA_WRITE_SQL',
    tier: 'write',
    database: `acme/${agent}`,
    shared: false,
    sql: `INSERT INTO t VALUES ('${agent}')`,
    requester: agent,
    createdAt,
    expiresAt: T0 + 3_600_000,
  };
}

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  const keys = keysFor(sb.config.prefix);
  store = new ApprovalStore(redis, keys);
  service = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members: new MemberRegistry(redis, keys) });
});
afterAll(async () => {
  await service.close();
  redis.disconnect();
  await sb.cleanup();
});

it('refuses a decision by call id that would land on a round the person did not read', async () => {
  await store.create(request('ap_r12_r1', 'scout', 'c1', T0 - 2000));
  // alice approves round 1; the worker finds its data changed and asks again as round 2.
  expect(await store.transition('ap_r12_r1', 'approved', 'alice')).toBe('OK');
  await store.transition('ap_r12_r1', 'superseded', 'worker');
  await store.create({ ...request('ap_r12_r2', 'scout', 'c1', T0 - 1000), round: 2, supersedes: 'ap_r12_r1' });

  const resolved = await service.resolveId('c1', 'acme', true);
  expect(resolved).toMatchObject({ ok: false, code: 'APPROVAL_CONFLICT' });
  expect((resolved as { detail: string }).detail).toContain('ap_r12_r2');
  expect((await store.get('ap_r12_r2'))?.state).toBe('pending');
  // Its own id decides it, and showing the call by its id still shows the round pending now.
  expect(await service.resolveId('ap_r12_r2', 'acme', true)).toBe('ap_r12_r2');
  expect(await service.resolveId('c1', 'acme')).toBe('ap_r12_r2');
  // A first round is decided by its call id as before.
  await store.create(request('ap_r12_f1', 'scout', 'c2', T0 - 500));
  expect(await service.resolveId('c2', 'acme', true)).toBe('ap_r12_f1');
});
