import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T1 (session 26): MCP tasks were a member's by name. A member revoked and added
// again under the same name (someone else: OAuth grants are not inherited so) listed the first
// one's tasks and read their results, for the tasks' 48 h.

let sb: Sandbox;
let k: KeyedApp;
let base: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

/** One JSON-RPC request to `/mcp` with `key`, answered as its `result` or `error`. */
async function rpc(key: string, method: string, params: Record<string, unknown>): Promise<{ result?: Record<string, unknown>; error?: { message: string } }> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as { result?: Record<string, unknown>; error?: { message: string } };
}

it("a member added again under the same name does not see the first one's tasks", async () => {
  const first = await k.memberKey('acme', 'bob', 'member');
  // A write: a read is not a task's to run (it answers at once; -32601 as a task).
  const made = await rpc(first, 'tools/call', { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE first_bob (who TEXT)' }, task: { ttl: 60_000 } });
  const taskId = (made.result!.task as { taskId: string }).taskId;
  expect(await rpc(first, 'tasks/list', {})).toMatchObject({ result: { tasks: [{ taskId }] } });

  // `agentdb members revoke`, then `members add` of the same name.
  expect(await new MemberRegistry(k.redis, keysFor(sb.config.prefix)).revoke('acme', 'bob')).toBe(true);
  const again = await k.memberKey('acme', 'bob', 'member');
  expect(again).not.toBe(first);
  expect(await rpc(again, 'tasks/list', {})).toMatchObject({ result: { tasks: [] } });
  expect((await rpc(again, 'tasks/get', { taskId })).error?.message).toMatch(/not found/i);
  expect((await rpc(again, 'tasks/result', { taskId })).error?.message).toMatch(/not found/i);
});
