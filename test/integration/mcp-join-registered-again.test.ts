import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T4: an MCP write that waits is kept for resends by caller, tool, arguments and
// settings (PendingCallJoins), not by the agent's registration. An agent removed and registered
// again under its name with the same settings sent the same write and took the earlier
// registration's waiting call id: answered NOT_FOUND ("There is no call"), a refusal saying
// nothing ran, for a write it never got sent. Its write is its own call, waiting for its approval.

let sb: Sandbox;
let k: KeyedApp;
let base: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb, { approvalWaitMs: 1000 });
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
}, 120_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

interface ToolAnswer {
  structuredContent?: { callId?: string; status?: string; ok?: boolean; error?: { code?: string } };
}

async function write(as: string, sql: string): Promise<ToolAnswer> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_WRITE_SQL', arguments: { sql } } }),
  });
  return ((await res.json()) as { result: ToolAnswer }).result;
}

it("an agent registered again does not join the earlier registration's waiting write", async () => {
  const settings = { database: 'agent' as const, approval: 'write' as const };
  const first = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings });
  const sql = 'CREATE TABLE t (x)';
  const waiting = await write(first, sql);
  expect(waiting.structuredContent).toMatchObject({ status: 'awaiting_approval' });
  expect(await new AgentRegistry(k.redis, keysFor(sb.config.prefix)).remove('acme', 'scout')).toBe(true);
  const again = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings });
  const second = await write(again, sql);
  expect(second.structuredContent).toMatchObject({ status: 'awaiting_approval' });
  expect(second.structuredContent?.callId).not.toBe(waiting.structuredContent?.callId);
  // Its own resend joins its own call.
  expect((await write(again, sql)).structuredContent?.callId).toBe(second.structuredContent?.callId);
});
