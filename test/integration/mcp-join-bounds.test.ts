import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T1 (session 26): a resend's join id (PendingCallJoins) is claimed before the
// call is counted, and was kept for the approval's and result's life (APPROVAL_TTL_MS + the
// result TTL, ~48 h by default) when the call was then refused RATE_LIMITED. An agent whose
// writes wait for a person, past its rate, could so have Redis keep one uncounted key per
// distinct write it sent (a few hundred bytes each, for two days), at whatever pace HTTP takes.

let sb: Sandbox;
let lim: KeyedApp;
let base: string;
let bearer: string;

beforeAll(async () => {
  sb = sandbox();
  lim = keyedApp(sb, { approvalWaitMs: 100, rateLimits: { windowS: 600, workspaceCalls: 3 } });
  bearer = await lim.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  base = await lim.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await lim.close();
  await sb.cleanup();
});

/** One plain `tools/call` of DATA_WRITE_SQL (the fast path), answered as its tool result. */
async function write(sql: string): Promise<{ structuredContent?: { error?: { code?: string } } }> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_WRITE_SQL', arguments: { sql } } }),
  });
  return ((await res.json()) as { result: { structuredContent?: { error?: { code?: string } } } }).result;
}

/** The join entries Redis keeps for longer than a minute. */
async function longJoins(): Promise<number> {
  const keys = await lim.redis.keys(`${keysFor(sb.config.prefix).mcpPendingCall('')}*`);
  let n = 0;
  for (const k of keys) if ((await lim.redis.ttl(k)) > 60) n++;
  return n;
}

it('a write refused RATE_LIMITED leaves no join entry behind for the approval’s life', async () => {
  // Spend the workspace's rate (each of these parks, and keeps its entry while it waits).
  let code: string | undefined;
  for (let i = 0; i < 10 && code !== 'RATE_LIMITED'; i++) code = (await write(`INSERT INTO t${i} VALUES (1)`)).structuredContent?.error?.code;
  expect(code).toBe('RATE_LIMITED');
  const before = await longJoins();
  for (let i = 0; i < 30; i++) expect((await write(`INSERT INTO flood VALUES (${i})`)).structuredContent?.error?.code).toBe('RATE_LIMITED');
  expect(await longJoins()).toBe(before);
});
