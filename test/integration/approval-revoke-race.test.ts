import { expect, it, vi } from 'vitest';
import { ApprovalService, type MemberLookup } from '../../src/approvals/approval-service.ts';
import type { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { MemberRegistry } from '../../src/registry/members.ts';
import { approvalRequest } from '../helpers/approval-request.ts';
import { withApprovalStoreService, type ApprovalStoreService } from '../helpers/approval-store-service.ts';

// Session 38, R13 (R12's leftover): `decide` reads the member again right before the transition,
// but the two are separate Redis steps (the members and the approvals are in different hash
// slots), so a revoke landing between them still let that one decision through. The lookup here
// lets the registry change at exactly that point: after the re-check answered, before the transition.

let box: ApprovalStoreService;
let store: ApprovalStore;
let members: MemberRegistry;
const T0 = Date.now();

const request = (id: string, callId: string) =>
  approvalRequest({ id, callId, workspace: 'acme', agent: 'scout', createdAt: T0 - 1000, expiresAt: T0 + 3_600_000 });

withApprovalStoreService((b) => {
  box = b;
  ({ store, members } = b);
});

/** A service whose member re-check answers, then lets `meanwhile` change the registry before it returns. */
function racedService(meanwhile: () => Promise<void>): ApprovalService {
  const lookup: MemberLookup = {
    get: async (workspace, name) => {
      const found = await members.get(workspace, name);
      await meanwhile();
      return found;
    },
    authenticate: (key) => members.authenticate(key),
  };
  return new ApprovalService({ redis: box.redis, prefix: box.sb.config.prefix, shardCount: box.sb.config.shardCount, members: lookup });
}

it('refuses a decision whose member was revoked between the re-check and the transition', async () => {
  const { member: bob } = await members.add('acme', 'bob', 'member');
  await store.create(request('ap_r13_r1', 'r1'));
  const service = racedService(async () => {
    await members.revoke('acme', 'bob');
  });
  const result = await service.decide('ap_r13_r1', { decision: 'approve', by: bob, via: 'key' });
  expect(result).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
  expect((await store.get('ap_r13_r1'))?.state).toBe('pending');
  await service.close();
});

it("refuses a shared drop's approval by an admin lowered to member between the re-check and the transition", async () => {
  const { member: cy } = await members.add('acme', 'cy', 'admin');
  await store.create({ ...request('ap_r13_d1', 'd1'), tool: 'DATA_DROP_TABLE', tier: 'destructive', shared: true });
  const service = racedService(async () => {
    await members.revoke('acme', 'cy');
    await members.add('acme', 'cy', 'member');
  });
  const result = await service.decide('ap_r13_d1', { decision: 'approve', by: cy, via: 'key' });
  expect(result).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
  expect((await store.get('ap_r13_d1'))?.state).toBe('pending');
  await service.close();
});

it('still decides for a member revoked only after the decision was recorded', async () => {
  const { member: di } = await members.add('acme', 'di', 'member');
  await store.create(request('ap_r13_ok', 'ok'));
  const service = racedService(async () => undefined);
  expect(await service.decide('ap_r13_ok', { decision: 'reject', by: di, via: 'key' })).toMatchObject({ ok: true });
  await members.revoke('acme', 'di');
  expect((await store.get('ap_r13_ok'))?.state).toBe('rejected');
  await service.close();
});

// Session 38, R14 (R13's leftovers): the decider's identity is the member's createdAt, so a name
// revoked and added again within one millisecond was the revoked one, its mark included; and a
// revoke whose mark was written but whose record was not left a member active who could not decide.

it('lets a member added again within the same millisecond as its revoke decide', async () => {
  const frozen = vi.spyOn(Date, 'now').mockReturnValue(T0);
  try {
    await members.add('acme', 'ed', 'member');
    await members.revoke('acme', 'ed');
    await members.add('acme', 'ed', 'member');
  } finally {
    frozen.mockRestore();
  }
  const ed = (await members.get('acme', 'ed'))!;
  await store.create(request('ap_r14_ms', 'ms'));
  const service = racedService(async () => undefined);
  expect(await service.decide('ap_r14_ms', { decision: 'approve', by: ed, via: 'key' })).toMatchObject({ ok: true });
  await service.close();
});

it('treats a member whose revoke failed after its mark as revoked, key included, and finishes the revoke', async () => {
  const { member: fay, key } = await members.add('acme', 'fay', 'member');
  const scripted = (members as unknown as { redis: { agentdbMemberCas: (...a: unknown[]) => Promise<number> } }).redis;
  const failing = vi.spyOn(scripted, 'agentdbMemberCas').mockRejectedValueOnce(new Error('connection lost'));
  await expect(members.revoke('acme', 'fay')).rejects.toThrow('connection lost');
  failing.mockRestore();
  expect(await members.authenticate(key)).toBeUndefined();
  expect(await members.get('acme', 'fay')).toBeUndefined();
  expect((await members.list('acme')).find((m) => m.name === 'fay')?.revoked).toBe(true);
  // Revoked for good: the name can be added again, and the new member decides.
  const { member: fay2 } = await members.add('acme', 'fay', 'member');
  expect(fay2.createdAt).toBeGreaterThan(fay.createdAt);
  await store.create(request('ap_r14_half', 'half'));
  const service = racedService(async () => undefined);
  expect(await service.decide('ap_r14_half', { decision: 'approve', by: fay2, via: 'key' })).toMatchObject({ ok: true });
  await service.close();
});

it('completes a revoke retried after it failed past its mark', async () => {
  const { key } = await members.add('acme', 'gus', 'member');
  const scripted = (members as unknown as { redis: { agentdbMemberCas: (...a: unknown[]) => Promise<number> } }).redis;
  const failing = vi.spyOn(scripted, 'agentdbMemberCas').mockRejectedValueOnce(new Error('connection lost'));
  await expect(members.revoke('acme', 'gus')).rejects.toThrow('connection lost');
  failing.mockRestore();
  expect(await members.revoke('acme', 'gus')).toBe(true);
  expect(await members.authenticate(key)).toBeUndefined();
});
