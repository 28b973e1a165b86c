import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import { approvalsTable } from '../../src/cli/approvals-table.ts';
import { pendingList } from '../../src/http/web/inbox-view.ts';
import { guardWrite } from '../../src/guard/guard.ts';

// Hostile review: an agent writes the SQL, params and rationale a person reviews. Characters a
// terminal or a browser acts on instead of showing — terminal escapes, bidi overrides — let it
// make the statement look like another one. The guard admits them inside a comment.
const ESC = '\x1b';
const RLO = '\u202e';
const base = {
  id: 'ap_x',
  state: 'pending',
  workspace: 'acme',
  agent: 'parker',
  database: 'acme',
  shard: 0,
  tool: 'DATA_WRITE_SQL',
  tier: 'write',
  callId: 'c1',
  callKey: 'acme.parker.c1',
  requester: 'parker',
  createdAt: Date.parse('2026-12-01T05:00:00Z'),
  expiresAt: Date.parse('2026-12-02T05:00:00Z'),
};
// The rationale cell comes after the SQL cell: jump back to its column and write over it.
const overwrite = { ...base, sql: 'DELETE FROM accounts', params: [], rationale: `${ESC}[40G UPDATE notes SET seen = 1    ` } as unknown as Approval;
// Bidi override inside a comment: the tail of the statement is displayed reversed.
const trojan = { ...base, sql: `DELETE FROM accounts /*${RLO} 1=1 ENOD */ WHERE id = 7`, params: [] } as unknown as Approval;

describe('what an agent wrote, as a person reviews it', () => {
  it('the guard admits such SQL (so the views must defuse it)', () => {
    expect(guardWrite(trojan.sql!).ok).toBe(true);
    expect(guardWrite(`DELETE FROM accounts /*${ESC}[2K*/`).ok).toBe(true);
  });

  it('approvals list prints no terminal escape an agent wrote', () => {
    expect(approvalsTable([overwrite])).not.toContain(ESC);
    expect(approvalsTable([trojan])).not.toContain(RLO);
  });

  it('the inbox card shows no raw bidi override an agent wrote', () => {
    expect(pendingList([trojan], 'csrf').value).not.toContain(RLO);
  });
});
