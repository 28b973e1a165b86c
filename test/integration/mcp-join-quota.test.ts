import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 27 (O1, 3): an MCP write sent again while the first waits for a person joins it
// (PendingCallJoins). A resend refused QUOTA_EXCEEDED by its workspace's Redis budget (counted
// before it joins) ended the join window outright, as an outcome would: the next identical send
// took a new call id, and once the budget had room made a second call with a second approval
// for the same write. The refusal was never taken, so it lets go as RATE_LIMITED does, keeping
// the entry while the waiting call holds its id.

const CAP = 1000;
let sb: Sandbox;
let k: KeyedApp;
let base: string;
let bearer: string;

beforeAll(async () => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(CAP) });
  await sb.pool();
  k = keyedApp(sb, { approvalWaitMs: 1000 });
  bearer = await k.agentKey('tiny', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

interface ToolAnswer {
  structuredContent?: { callId?: string; status?: string; error?: { code?: string } };
}

/** One plain `tools/call` of DATA_WRITE_SQL, answered as its tool result (`as`: the agent's bearer key). */
async function write(sql: string, at = base, as = bearer): Promise<ToolAnswer> {
  const res = await fetch(`${at}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_WRITE_SQL', arguments: { sql } } }),
  });
  return ((await res.json()) as { result: ToolAnswer }).result;
}

it('a resend refused QUOTA_EXCEEDED before it was taken keeps the waiting call joinable: the next resend joins it', async () => {
  const sql = 'CREATE TABLE t (x)';
  const first = await write(sql);
  // Waiting (for a person, or its turn on a loaded machine): either way a resend joins it.
  expect(first.structuredContent).toMatchObject({ status: expect.any(String) });
  const waiting = first.structuredContent!.callId;
  // The parked call holds the workspace's budget: a resend, counted before it joins, is refused by
  // it, and answers where the waiting call stands (since session 29, R1: not QUOTA_EXCEEDED,
  // "nothing was stored, created or run", for a call that runs once approved).
  const resent = (await write(sql)).structuredContent;
  expect(resent).toMatchObject({ callId: waiting, status: expect.any(String) });
  expect(resent?.error).toBeUndefined();
  // Still under the waiting call's id (no new call, no second approval once there is room).
  expect((await write(sql)).structuredContent?.callId).toBe(waiting);
});

describe('a QUOTA_EXCEEDED that is the outcome of a call that ran', () => {
  const QUOTA = 256 * 1024;
  let disk: Sandbox;
  let app: KeyedApp;
  let at: string;
  let key: string;

  beforeAll(async () => {
    disk = sandbox({ WORKSPACE_MAX_BYTES: String(QUOTA) });
    await disk.pool(undefined, {}, { writesVerdictKeepMs: 0 });
    app = keyedApp(disk, { approvalWaitMs: 1000 });
    key = await app.agentKey('full', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
    at = await app.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await app?.close();
    await disk?.cleanup();
  });

  it('ends the join window as any outcome does: the same write sent again is a new call', async () => {
    // Another agent of the workspace takes it past its byte quota.
    const fill = 'CREATE TABLE big AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT randomblob(10000) AS b FROM c';
    const filled = await disk
      .client()
      .call({ workspace: 'full', agent: 'filler', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: fill } });
    expect(filled.ok).toBe(true);
    const sql = 'CREATE TABLE t (x)';
    const first = await write(sql, at, key);
    expect(first.structuredContent).toMatchObject({ error: { code: 'QUOTA_EXCEEDED' } });
    const again = await write(sql, at, key);
    expect(again.structuredContent).toMatchObject({ error: { code: 'QUOTA_EXCEEDED' } });
    expect(again.structuredContent?.callId).not.toBe(first.structuredContent?.callId);
  });
});
