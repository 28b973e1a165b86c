import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import { effectView } from '../../src/http/web/effect-view.ts';

const parked = {
  id: 'ap_x',
  state: 'pending',
  workspace: 'acme',
  agent: 'scout',
  database: 'acme/scout',
  shard: 0,
  tool: 'DATA_WRITE_SQL',
  tier: 'write',
  sql: 'INSERT INTO leads (email) VALUES (?)',
  params: ['ada@northwind.io'],
  callId: 'c1',
  callKey: 'acme.scout.c1',
  requester: 'scout',
  createdAt: Date.parse('2026-12-01T05:00:00Z'),
  expiresAt: Date.parse('2026-12-02T05:00:00Z'),
  effect: null,
  effectNote: 'The database does not exist yet: this write would be its first, and it changes no existing rows.',
} as unknown as Approval;

// A write parked before its database or table existed has no computed effect. Approved, the
// worker commits it only if it changes no rows; one that would insert a row parks again with its
// effect (superseded, APPROVAL_STALE). A new user approved such an INSERT on a card that said
// "approving runs it on the data as it is then" and saw a second card for it instead (session 28).
describe('an inbox card of a write whose effect is not known', () => {
  it('says that approving commits only a write that changes no rows, and that one changing rows comes back', () => {
    const card = String(effectView(parked));
    expect(card).toContain('The database does not exist yet');
    expect(card).not.toContain('approving runs it on the data as it is then');
    expect(card).toContain('commits only if it changes no rows');
    expect(card).toContain('comes back here with its effect');
  });
});
