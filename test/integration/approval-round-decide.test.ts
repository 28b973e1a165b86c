import { expect, it } from 'vitest';
import type { ApprovalService } from '../../src/approvals/approval-service.ts';
import type { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { approvalRequest } from '../helpers/approval-request.ts';
import { withApprovalStoreService } from '../helpers/approval-store-service.ts';

// Session 37, R12: `agentdb approvals approve <call id>` resolved the call id to the call's pending
// approval, whatever its round. Two people read round 1 of call `c1` (`approvals show c1`); alice
// approves it, its data changed meanwhile, so nothing commits and it is asked again as round 2,
// with another effect; bob, who read round 1, types `approvals approve c1` and approved round 2,
// which he never saw (where without round 2 he would have been told APPROVAL_CONFLICT). A decision
// by call id that lands on a later round is now refused with APPROVAL_CONFLICT naming the new id.

let store: ApprovalStore;
let service: ApprovalService;
const T0 = Date.now();

const request = (id: string, agent: string, callId: string, createdAt: number) =>
  approvalRequest({ id, callId, workspace: 'acme', agent, createdAt, expiresAt: T0 + 3_600_000 });

withApprovalStoreService((box) => {
  ({ store, service } = box);
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
