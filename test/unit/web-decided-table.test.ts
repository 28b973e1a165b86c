import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import { decidedTable } from '../../src/http/web/inbox-view.ts';

// The inbox's decided list named only the state, agent and tool: two decided writes of one agent
// looked alike. Each row now says which call it was: its statement (escaped), database, call id.
const base = {
  id: 'ap_1',
  callId: 'clerk-7',
  state: 'rejected',
  tier: 'write',
  workspace: 'acme',
  agent: 'clerk',
  tool: 'DATA_WRITE_SQL',
  database: 'acme/clerk',
  createdAt: 0,
  expiresAt: 1,
  decidedAt: 2,
  decidedBy: 'ada',
  reason: 'no',
} as unknown as Approval;

describe('the decided list', () => {
  it("shows each call's statement, database and call id, as text", () => {
    const out = decidedTable([{ ...base, sql: "INSERT INTO t VALUES ('<b>x</b>')" } as Approval]).value;
    expect(out).toContain('<th>what</th>');
    expect(out).toContain('INSERT INTO t VALUES (&#39;&lt;b&gt;x&lt;/b&gt;&#39;)');
    expect(out).toContain('acme/clerk · clerk-7');
  });

  it('shortens a long statement and names a drop by its table', () => {
    const long = decidedTable([{ ...base, sql: `SELECT ${'x'.repeat(200)}` } as Approval]).value;
    expect(long).toContain(`SELECT ${'x'.repeat(72)}…</code>`);
    expect(decidedTable([{ ...base, tool: 'DATA_DROP_TABLE', table: 'leads' } as Approval]).value).toContain('drop leads');
  });
});
