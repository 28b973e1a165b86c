import { afterAll, beforeAll, expect, it } from 'vitest';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { Principal } from '../../src/registry/principal.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// A db_* call's answer is a new object made of the client's (`dbAnswer`): a refusal before the
// call was taken must still be known as one (counted as the Redis budget's, letting an MCP join
// go), though the client noted only its own answer. No worker runs: the client refuses first.

let sb: Sandbox;
let client: AgentDbClient;

beforeAll(() => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: '1' });
  client = sb.client();
});
afterAll(async () => {
  await client.close();
  await sb.cleanup();
});

it("knows a db_query refused by the Redis budget before it was taken as the client's refusal, counted once", async () => {
  const refused: string[] = [];
  const calls = new KeyedCalls(client, (quota) => refused.push(quota));
  const principal: Principal = {
    kind: 'agent',
    workspace: 'acme',
    agent: 'scout',
    keyId: 'k1',
    settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
    surface: { kind: 'db', mode: 'read', schemaMode: 'read', policy: 'allow' },
  };
  const query = () => calls.call(principal, { tool: 'db_query', arguments: { statement: 'SELECT 1' } }, { wait: false, maxWaitMs: 100 });
  // The first is taken (queued, no worker): what it holds in Redis passes the workspace's budget.
  const taken = await query();
  expect(taken).toMatchObject({ ok: false, status: 'queued' });
  expect(calls.untaken(taken)).toBe(false);
  const answer = await query();
  expect(answer).toMatchObject({ ok: false, tool: 'db_query', error: { code: 'QUOTA_EXCEEDED' } });
  expect(client.refusedUntaken(answer)).toBe(true);
  expect(calls.untaken(answer)).toBe(true);
  expect(refused).toEqual(['redis']);
});
