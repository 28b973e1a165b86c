import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';
import { CLI, runCli } from '../helpers/processes.ts';

// `agentdb mcp --stdio` checks its key before every request: with Redis down its tools/list
// answered a JSON-RPC error, so a client (re)listing during an outage showed the server as
// broken, as /mcp's did (review N6, session 30; test/integration/mcp-redis-down.test.ts).

let sb: Sandbox;
let own: OwnRedis;
let env: Record<string, string>;
let client: Client | undefined;

beforeAll(async () => {
  sb = sandbox();
  own = await OwnRedis.start();
  env = { ...sb.env, REDIS_URL: own.url };
  const cli = (...args: string[]) => runCli(args, env);
  expect((await cli('workspaces', 'set', '--workspace', 'acme', '--plan', 'pro')).code).toBe(0);
  expect((await cli('agents', 'set', '--workspace', 'acme', '--agent', 'scout', '--database', 'agent')).code).toBe(0);
  const key = (JSON.parse((await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'scout', '--json')).stdout) as { key: string }).key;
  client = new Client({ name: 'e2e-stdio-redis-down', version: '1' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [...CLI, 'mcp', '--stdio'],
      env: { ...(process.env as Record<string, string>), ...env, AGENTDB_KEY: key },
      stderr: 'pipe',
    }),
  );
});
afterAll(async () => {
  await client?.close();
  await own?.stop().catch(() => undefined);
  await sb?.cleanup();
});

it('lists its tools and answers ping with Redis down; a tool call answers UNAVAILABLE', async () => {
  const names = ['DATA_DESCRIBE_SCHEMA', 'DATA_QUERY_SQL', 'DATA_WRITE_SQL', 'DATA_DROP_TABLE'];
  expect((await client!.listTools()).tools.map((t) => t.name)).toEqual(names);
  await own.kill();
  expect((await client!.listTools()).tools.map((t) => t.name)).toEqual(names);
  expect(await client!.ping()).toEqual({});
  const call = (await client!.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } })) as { isError?: boolean; structuredContent?: unknown };
  expect(call).toMatchObject({ isError: true, structuredContent: { error: { code: 'UNAVAILABLE' } } });
}, 60_000);
