import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentDbTools } from '../../src/frameworks/ai-sdk.ts';
import { startFrameworkService, type FrameworkService } from '../helpers/framework-service.ts';

// An app that binds its adapter to one scope takes `scope` and `agent` out of the model's
// schemas: a model that sends `agent` anyway must not reach another agent's tables with it.

let svc: FrameworkService;
// Kept so that a start that outlives its hook's timeout is still stopped: a CI run at load 20
// left this file's worker and its children running after the suite.
let starting: Promise<FrameworkService> | undefined;

beforeAll(async () => {
  starting = startFrameworkService();
  svc = await starting;
  const out = await svc.cli('agents', 'set', '--workspace', 'acme', '--agent', 'lead', '--database', 'workspace', '--shared-data');
  expect(out.code, out.stderr).toBe(0);
  for (const sql of ['CREATE TABLE payroll (who TEXT, salary INTEGER)', "INSERT INTO payroll VALUES ('ada', 123456)"]) {
    expect(
      await svc.client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } }),
    ).toMatchObject({ ok: true });
  }
}, 120_000);
afterAll(async () => {
  await (await starting?.catch(() => undefined))?.close();
});

describe('an adapter bound to a scope', () => {
  it('refuses a model\'s "agent" argument instead of reading that agent\'s tables', async () => {
    const unbound = await agentDbTools(svc.client, { workspace: 'acme', agent: 'lead' });
    // The registration's grant reaches scout's tables when the app leaves the model the choice.
    const open = await unbound.tools.DATA_QUERY_SQL!.execute!({ sql: 'SELECT salary FROM payroll', agent: 'scout' }, {
      toolCallId: 'u1',
      messages: [],
    } as never);
    expect(open).toMatchObject({ isError: false, data: { rows: [[123456]] } });

    const bound = await agentDbTools(svc.client, { workspace: 'acme', agent: 'lead', scope: 'agent' });
    expect(Object.keys((bound.tools.DATA_QUERY_SQL!.inputSchema as { jsonSchema: { properties: object } }).jsonSchema.properties)).not.toContain('agent');
    const answer = (await bound.tools.DATA_QUERY_SQL!.execute!({ sql: 'SELECT salary FROM payroll', agent: 'scout' }, {
      toolCallId: 'b1',
      messages: [],
    } as never)) as {
      isError: boolean;
      text: string;
    };
    expect(answer.isError).toBe(true);
    expect(answer.text).toMatch(/^INVALID_ARGUMENTS\n/);
    expect(answer.text).toContain('bound to scope');
    expect(answer.text).not.toContain('123456');
  });
});
