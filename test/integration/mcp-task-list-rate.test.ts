import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Review 19, H29 finding 6: a tasks/list page looks at each working task's call, and nothing
// bounded how often a client asked. Each page counts a tenth of a call against the key's and
// workspace's budgets, as a lookup of a call does.

let sb: Sandbox;
let k: KeyedApp;
let client: Client;

beforeAll(async () => {
  sb = sandbox();
  // One call a key per window: ten lookups.
  k = keyedApp(sb, { rateLimits: { windowS: 600, keyCalls: 1 } });
  const key = await k.agentKey('acme', 'lister', { displayName: 'Lister', settings: { database: 'agent' } });
  const base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  client = new Client({ name: 'agentdb-test', version: '1.0.0' }, { capabilities: { tasks: {} } });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
});
afterAll(async () => {
  await client.close();
  await k.close();
  await sb.cleanup();
});

it('counts each tasks/list page as a lookup and refuses past the budget with RATE_LIMITED and when to ask again', async () => {
  for (let i = 0; i < 10; i++) expect((await client.experimental.tasks.listTasks()).tasks).toEqual([]);
  // The SDK answers a store's error as -32602 with its message: the code and the wait are in it.
  await expect(client.experimental.tasks.listTasks()).rejects.toMatchObject({ message: expect.stringMatching(/RATE_LIMITED: .* ask again in \d+ s/) });
});
