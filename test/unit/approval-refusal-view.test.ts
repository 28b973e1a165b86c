import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import { approvalsTable } from '../../src/cli/approvals-table.ts';
import { pendingList } from '../../src/http/web/inbox-view.ts';

const pending = {
  id: 'ap_x',
  state: 'pending',
  workspace: 'acme',
  agent: 'parker',
  database: 'acme',
  shard: 0,
  tool: 'DATA_WRITE_SQL',
  tier: 'write',
  sql: 'INSERT INTO notes (body) VALUES (?)',
  params: ['hi'],
  callId: 'c1',
  callKey: 'acme.parker.c1',
  requester: 'parker',
  createdAt: Date.parse('2026-12-01T05:00:00Z'),
  expiresAt: Date.parse('2026-12-02T05:00:00Z'),
} as unknown as Approval;
const why = 'the agent key k_1 it was made with was revoked.';

// A person deciding must see that approving would not run the call (its key or agent changed
// since it was parked), in the inbox and in `approvals list`.
describe('a pending approval whose call would be refused', () => {
  it('says so on its inbox card, as text', () => {
    const page = pendingList([pending], 'csrf', new Map([['ap_x', `${why} <b>`]])).value;
    expect(page).toContain('Approving will not run it: since it was parked, the agent key k_1 it was made with was revoked.');
    expect(page).toContain('&lt;b&gt;');
    expect(pendingList([pending], 'csrf').value).not.toContain('Approving will not run it');
  });

  it('says so in the approvals table', () => {
    expect(approvalsTable([pending], new Map([['ap_x', why]]))).toContain('will be refused: "the agent key k_1 it was made with was …"');
    expect(approvalsTable([pending])).not.toContain('will be refused');
  });
});
