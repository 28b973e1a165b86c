import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Issue 27 part 4: no work left behind by a caller that went away. Every `?wait=true` request
// kept a look at the call's job every 30 s until the call ended, long after its client had
// gone: 20,000 abandoned waits on one parked call kept Redis at 2,700 commands a second for
// the day its approval could take. Now a client holds one watch per call, shared by its waits,
// and it goes with the last of them.

let sb: Sandbox;
let k: KeyedApp;
let base: string;
const key: Record<string, string> = {};
const idle = { calls: 0, waits: 0, looks: 0 };

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // Waits far longer than the test: only their clients going away ends them.
  k = keyedApp(sb, { waitMs: 600_000, approvalWaitMs: 600_000 });
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  key.ada = await k.memberKey('acme', 'ada', 'admin');
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const auth = () => ({ authorization: `Bearer ${key.careful}` });

/** Parks a write of the careful agent under `callId`; answers its approval id. */
async function park(callId: string): Promise<string> {
  const r = await k.app.inject({
    method: 'POST',
    url: '/v1/calls?wait=false',
    headers: auth(),
    payload: { tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE ${callId.replace(/-/g, '_')} (x)` }, callId },
  });
  expect(r.json()).toMatchObject({ status: 'awaiting_approval' });
  return (r.json() as { approval: { id: string } }).approval.id;
}

/** Starts `n` requests with `start`, each with its own abort, and answers the aborts. */
function opened(n: number, start: (signal: AbortSignal) => Promise<Response>): { abortAll(): Promise<void> } {
  const requests = Array.from({ length: n }, () => {
    const ac = new AbortController();
    return { ac, done: start(ac.signal).catch((err: Error) => err) };
  });
  return {
    async abortAll() {
      for (const r of requests) r.ac.abort();
      for (const r of requests) expect(await r.done).toMatchObject({ name: 'AbortError' });
    },
  };
}

describe('waits whose callers went away', () => {
  it('200 aborted GET ?wait=true on one parked call leave no wait, look or timer; a new wait still gets the answer', async () => {
    const approval = await park('gone-1');
    expect(k.client.waitCounts()).toEqual(idle);
    const waits = opened(200, (signal) => fetch(new URL('/v1/calls/gone-1?wait=true', base), { headers: auth(), signal }));
    // One watch for the call, one look at its job, shared by all 200.
    await expect.poll(() => k.client.waitCounts(), { timeout: 20_000 }).toEqual({ calls: 1, waits: 200, looks: 1 });
    expect(k.calls.waiting()).toBe(200);
    await waits.abortAll();
    await expect.poll(() => k.client.waitCounts(), { timeout: 20_000 }).toEqual(idle);
    // Nor the requests' own bound timers.
    expect(k.calls.waiting()).toBe(0);

    const answer = fetch(new URL('/v1/calls/gone-1?wait=true', base), { headers: auth() });
    await expect.poll(() => k.client.waitCounts(), { timeout: 20_000 }).toEqual({ calls: 1, waits: 1, looks: 1 });
    expect(await k.client.decide(approval, { decision: 'approve', key: key.ada! })).toMatchObject({ ok: true });
    const done = await answer;
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({ ok: true, callId: 'gone-1' });
    expect(k.client.waitCounts()).toEqual(idle);
  });

  it('aborted POST /v1/calls and MCP tools/call that wait on a parked write leave nothing either', async () => {
    const posts = opened(20, (signal) =>
      fetch(new URL('/v1/calls', base), {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE gone_post (x)' }, callId: 'gone-2' }),
        signal,
      }),
    );
    const mcp = opened(20, (signal) =>
      fetch(new URL('/mcp', base), {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE gone_post (x)' }, _meta: { 'agentdb/callId': 'gone-2' } },
        }),
        signal,
      }),
    );
    await expect.poll(() => k.client.waitCounts(), { timeout: 20_000 }).toEqual({ calls: 1, waits: 40, looks: 1 });
    await posts.abortAll();
    await mcp.abortAll();
    await expect.poll(() => k.client.waitCounts(), { timeout: 20_000 }).toEqual(idle);
    expect(k.calls.waiting()).toBe(0);
  });

  it('the client library: an aborted wait rejects with its reason; closing the client answers its waits UNAVAILABLE', async () => {
    await park('gone-3');
    const ac = new AbortController();
    const who = { workspace: 'acme', agent: 'careful' };
    const waiting = k.client.result('gone-3', { ...who, wait: true, signal: ac.signal });
    await expect.poll(() => k.client.waitCounts()).toEqual({ calls: 1, waits: 1, looks: 1 });
    ac.abort(new Error('caller left'));
    await expect(waiting).rejects.toThrow('caller left');
    expect(k.client.waitCounts()).toEqual(idle);

    const other = sb.client();
    const pending = other.result('gone-3', { ...who, wait: true });
    await expect.poll(() => other.waitCounts()).toEqual({ calls: 1, waits: 1, looks: 1 });
    await other.close();
    expect(await pending).toMatchObject({
      ok: false,
      error: { code: 'UNAVAILABLE', message: expect.stringContaining('client was closed') },
      mayStillRun: true,
    });
    expect(other.waitCounts()).toEqual(idle);
  });
});
