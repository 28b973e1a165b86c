import { expect, it } from 'vitest';
import type { ApprovalService } from '../../src/approvals/approval-service.ts';
import type { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { approvalRequest } from '../helpers/approval-request.ts';
import { withApprovalStoreService } from '../helpers/approval-store-service.ts';

// Session 37, R11: `agentdb approvals approve <call id>` resolved the call id by the pending
// approvals only, when one was pending. Call ids are the agents' own and repeat across agents: a
// person about to approve agent a1's `step-1`, read in `approvals list`, which someone else decided
// (or which expired) meanwhile, approved agent a2's `step-1`, parked since, whose SQL they never
// read. A call id naming approvals of more than one call, in any state, is now refused as naming
// several; one call's own approvals (asked again when its data changed) still resolve.

let store: ApprovalStore;
let service: ApprovalService;
const T0 = Date.now();

const request = (id: string, agent: string, callId: string, createdAt: number) =>
  approvalRequest({ id, callId, workspace: 'acme', agent, createdAt, expiresAt: T0 + 3_600_000 });

withApprovalStoreService((box) => {
  ({ store, service } = box);
});

it("refuses a call id that another agent's decided call also has, rather than pick the pending one", async () => {
  await store.create(request('ap_r11_a1', 'a1', 'step-1', T0 - 2000));
  await store.transition('ap_r11_a1', 'rejected', 'bob');
  await store.create(request('ap_r11_a2', 'a2', 'step-1', T0 - 1000));
  const resolved = await service.resolveId('step-1', 'acme');
  expect(resolved).toMatchObject({ ok: false, code: 'INVALID_ARGUMENTS' });
  expect((resolved as { detail: string }).detail).toMatch(/names 2 approvals \(.*ap_r11_a1.*\)/);
  expect((resolved as { detail: string }).detail).toContain('ap_r11_a2');
  // The approval's own id still names it.
  expect(await service.resolveId('ap_r11_a2', 'acme')).toBe('ap_r11_a2');
});

it("resolves one call's approvals, asked again after its data changed: the pending one, else the latest", async () => {
  await store.create(request('ap_r11_b1', 'b', 'step-2', T0 - 3000));
  await store.transition('ap_r11_b1', 'superseded', 'worker');
  await store.create({ ...request('ap_r11_b2', 'b', 'step-2', T0 - 2000), round: 2, supersedes: 'ap_r11_b1' });
  expect(await service.resolveId('step-2', 'acme')).toBe('ap_r11_b2');
  await store.transition('ap_r11_b2', 'approved', 'bob');
  // Decided: the latest, so a second decision is told APPROVAL_CONFLICT rather than which ids to pick.
  expect(await service.resolveId('step-2', 'acme')).toBe('ap_r11_b2');
  expect(await service.resolveId('step-2', 'other')).toMatchObject({ ok: false, code: 'NOT_FOUND' });
});
