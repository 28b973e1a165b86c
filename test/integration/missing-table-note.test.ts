import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { missingTableNote } from '../../src/policy/missing-table-note.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// docs/calls.md "Two agents, one shared table": an agent with database "workspace" that leaves
// out "scope":"workspace" looks in its own database, and got SQLite's "no such table: leads"
// with the registry's hint (DATA_DESCRIBE_SCHEMA, which lists that same own database). Review
// N10: the answer now says where else the table may be, and how to reach it.
let sb: Sandbox;
let client: AgentDbClient;
const WS = 'notes';

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  const made = await client.call(
    {
      workspace: WS,
      agent: 'research',
      settings: { database: 'workspace', sharedData: true },
      tool: 'DATA_WRITE_SQL',
      arguments: { scope: 'workspace', sql: 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)' },
    },
    { timeoutMs: 20_000 },
  );
  expect(made.ok).toBe(true);
});
afterAll(async () => {
  await sb.cleanup();
});

const select = { sql: 'SELECT email FROM leads' };

describe('a table not where the call looked', () => {
  it('tells an agent with database "workspace" that the shared tables take "scope":"workspace", and the same call with it reads them', async () => {
    const missed = await client.call(
      { workspace: WS, agent: 'outreach', settings: { database: 'workspace' }, tool: 'DATA_QUERY_SQL', arguments: select },
      { timeoutMs: 20_000 },
    );
    expect(missed).toMatchObject({ ok: false, error: { code: 'SQL_ERROR' } });
    const message = missed.ok ? '' : missed.error.message;
    expect(message).toContain(
      'No such table: leads. It is not among outreach\'s own tables, where a call without "scope" looks; a table of the workspace\'s shared database takes "scope":"workspace"',
    );
    const found = await client.call(
      { workspace: WS, agent: 'outreach', settings: { database: 'workspace' }, tool: 'DATA_QUERY_SQL', arguments: { ...select, scope: 'workspace' } },
      { timeoutMs: 20_000 },
    );
    expect(found).toMatchObject({ ok: true, result: { rows: [] } });
  });

  it('tells a member that an agent\'s own tables take "agent"; says nothing more where there is nowhere else to look', async () => {
    const member = await client.call(
      { workspace: WS, agent: '@bob', member: { name: 'bob', role: 'member' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT * FROM notes' } },
      { timeoutMs: 20_000 },
    );
    expect(member.ok ? '' : member.error.message).toContain(
      'It is not among the workspace\'s shared tables, where a member\'s call without "agent" looks; an agent\'s own table takes "agent":"<name>"',
    );
    // An agent of database "agent" has only its own tables; one that named its scope chose it.
    for (const [settings, args] of [
      [{ database: 'agent' }, select],
      [{ database: 'workspace' }, { ...select, scope: 'agent' }],
    ] as const) {
      const own = await client.call({ workspace: WS, agent: 'solo', settings, tool: 'DATA_QUERY_SQL', arguments: args }, { timeoutMs: 20_000 });
      expect(own).toMatchObject({ ok: false, error: { code: 'SQL_ERROR', message: 'SQLite refused the statement. No such table: leads.' } });
    }
  });

  it('adds nothing to other SQL errors, nor for a call that named another agent', () => {
    const agent = {
      kind: 'agent' as const,
      workspace: WS,
      agent: 'outreach',
      settings: { database: 'workspace' as const, approval: 'never' as const, sandbox: false, sharedData: true },
    };
    expect(missingTableNote(agent, {}, { workspace: WS, agent: 'outreach' }, 'no such column: x')).toBeUndefined();
    expect(missingTableNote(agent, { agent: 'research' }, { workspace: WS, agent: 'research' }, 'no such table: t')).toBeUndefined();
    expect(missingTableNote(agent, { scope: 'workspace' }, { workspace: WS }, 'no such table: t')).toBeUndefined();
    expect(missingTableNote(agent, {}, { workspace: WS, agent: 'outreach' }, 'no such table: t')).toMatch(/^It is not among outreach's own tables/);
  });
});
