import { expect, it } from 'vitest';
import type { ApprovalService } from '../../src/approvals/approval-service.ts';
import type { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { MemberRegistry } from '../../src/registry/members.ts';
import { approvalRequest } from '../helpers/approval-request.ts';
import { withApprovalStoreService } from '../helpers/approval-store-service.ts';

// Session 37, R12: a decision is judged by the member as the registry has them when it is made,
// not as their request found them. HTTP, the web page and a batch of 50 authenticate once, then
// decide: a member revoked meanwhile (or revoked and added again with a lower role) still decided,
// a shared drop included. The state such a race leaves is built here directly: the request's
// member (`by`, as authenticated), then the registry changed, then the decision.

let store: ApprovalStore;
let members: MemberRegistry;
let service: ApprovalService;
const T0 = Date.now();

const request = (id: string, agent: string, callId: string, createdAt: number) =>
  approvalRequest({ id, callId, workspace: 'acme', agent, createdAt, expiresAt: T0 + 3_600_000 });

withApprovalStoreService((box) => {
  ({ store, members, service } = box);
});

it('refuses the decision of a member revoked after their request was authenticated, in a batch too', async () => {
  const { member: bob } = await members.add('acme', 'bob', 'member');
  await store.create(request('ap_r12_m1', 'scout', 'm1', T0 - 3000));
  await store.create(request('ap_r12_m2', 'scout', 'm2', T0 - 2000));
  await members.revoke('acme', 'bob');
  const one = await service.decide('ap_r12_m1', { decision: 'approve', by: bob, via: 'key' });
  expect(one).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
  const many = await service.decideMany(['ap_r12_m1', 'ap_r12_m2'], { decision: 'reject', by: bob, via: 'key' });
  expect(many).toMatchObject({
    ok: true,
    results: [
      { ok: false, code: 'NOT_PERMITTED' },
      { ok: false, code: 'NOT_PERMITTED' },
    ],
  });
  expect((await store.get('ap_r12_m1'))?.state).toBe('pending');
  expect((await store.get('ap_r12_m2'))?.state).toBe('pending');
  // Added again under the same name: another member, whose key this request did not carry.
  await members.add('acme', 'bob', 'member');
  expect(await service.decide('ap_r12_m1', { decision: 'approve', by: bob, via: 'key' })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
});

it("refuses a shared drop's approval by an admin whose role was lowered meanwhile", async () => {
  const { member: cy } = await members.add('acme', 'cy', 'admin');
  await store.create({ ...request('ap_r12_d1', 'scout', 'd1', T0 - 1000), tool: 'DATA_DROP_TABLE', tier: 'destructive', shared: true });
  // Revoked and added again as a plain member, keeping no createdAt on the request (as a runtime's own Decider may not).
  await members.revoke('acme', 'cy');
  await members.add('acme', 'cy', 'member');
  const lowered = await service.decide('ap_r12_d1', { decision: 'approve', by: { workspace: 'acme', name: 'cy', role: cy.role }, via: 'key' });
  expect(lowered).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
  expect((await store.get('ap_r12_d1'))?.state).toBe('pending');
});
