import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import { decidedLine } from '../../src/cli/approvals.ts';

const approval = (over: Partial<Approval>): Approval =>
  ({ id: 'ap_1', callId: 'c1', workspace: 'acme', agent: 'scout', state: 'approved', decidedBy: 'bob', ...over }) as Approval;

describe('decidedLine: what `agentdb approvals approve|reject` prints for a person', () => {
  it('says what was decided, by whom, of which call, and what happens to it', () => {
    expect(decidedLine(approval({}))).toBe('approved ap_1 (call c1 of acme/scout) by bob: it runs now');
    expect(decidedLine(approval({ state: 'rejected', reason: 'wrong table' }))).toBe(
      'rejected ap_1 (call c1 of acme/scout) by bob: it will not run; the agent gets APPROVAL_REJECTED and the reason; reason: wrong table',
    );
  });

  it("gives the call's outcome when it is known, on one line with what a terminal acts on escaped", () => {
    expect(decidedLine(approval({ ran: { ok: true, at: 1 } }))).toBe('approved ap_1 (call c1 of acme/scout) by bob: it ran: ok');
    expect(decidedLine(approval({ ran: { ok: false, code: 'SQL_ERROR', message: 'no such table:\n\u001b[2Jleads', at: 1 }, reason: 'ok\u202e' }))).toBe(
      'approved ap_1 (call c1 of acme/scout) by bob: it ran: failed SQL_ERROR (no such table: \\u001b[2Jleads); reason: ok\\u202e',
    );
  });
});
