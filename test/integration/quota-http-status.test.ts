import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// Session 29, L3: QUOTA_EXCEEDED has two meanings since session 28, the workspace's Redis budget
// (passes in minutes, `error.retryAfter`) and its disk quota (passes in days). Over HTTP the
// first was a 200 envelope on POST /v1/calls, and the second a 429 without Retry-After on a
// restore, which every HTTP client and proxy reads as "send it again". Now: the budget's is a 429
// with Retry-After wherever it is answered, the disk quota's a 403; the body is the same envelope.
const BIG = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT i, printf('%.1000c','x') AS s FROM c";
let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;
let k: KeyedApp;
let web: WebServer;

beforeAll(async () => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(256 * 1024), WORKSPACE_MAX_BYTES: '200000', RESULT_TTL_HOURS: '1' });
  await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  k = keyedApp(sb, { history: new HistoryClient(ops, sb.config.shardCount) });
  // One call a window for a workspace: ten tenths, ten history pages.
  web = await startWebServer(sb, { rateLimits: { windowS: 600, workspaceCalls: 1 } });
  // Workspace `fat`, past its disk bytes (200,000) with one write of 300 KB.
  for (const sql of ['CREATE TABLE t (b BLOB)', 'INSERT INTO t SELECT randomblob(300000)'])
    expect(await client.call({ workspace: 'fat', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject({
      ok: true,
    });
}, 60_000);
afterAll(async () => {
  await web?.close();
  await k?.close();
  await ops?.close();
  await sb?.cleanup();
});

/** A signed-in web session of a new admin of `workspace`: its cookie, and the CSRF token of the history page of `db`. */
async function webAdmin(workspace: string, db: string, server = web): Promise<{ cookie: string; csrf: string }> {
  const cookie = await signedInCookie(server, workspace, 'bea', 'admin');
  const page = await fetch(`${server.url}/data/history?db=${encodeURIComponent(db)}`, { headers: { cookie, accept: 'text/html' } });
  expect(page.status).toBe(200);
  return { cookie, csrf: /<meta name="csrf-token" content="([^"]+)">/.exec(await page.text())![1]! };
}

describe('QUOTA_EXCEEDED over HTTP, by the quota that answered it', () => {
  it("POST /v1/calls refused by the workspace's Redis budget answers 429 with Retry-After, the envelope as its body", async () => {
    const key = await k.agentKey('hog', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    let refused: Awaited<ReturnType<KeyedApp['app']['inject']>> | undefined;
    for (let i = 0; i < 12 && !refused; i++) {
      const res = await k.app.inject({
        method: 'POST',
        url: '/v1/calls',
        headers: { authorization: `Bearer ${key}` },
        payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: BIG, max_rows: 100 } },
      });
      if (res.json().ok === false) refused = res;
    }
    expect(refused, 'no call refused by the budget').toBeDefined();
    const body = refused!.json();
    expect(body).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED', retryAfter: expect.any(Number) } });
    expect(refused!.statusCode).toBe(429);
    expect(refused!.headers['retry-after']).toBe(String(body.error.retryAfter));

    // /mcp answers it as a tool result, its structured content carrying the same seconds.
    const mcp = await k.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } } },
    });
    expect(mcp.statusCode).toBe(200);
    expect(mcp.json().result).toMatchObject({ isError: true, structuredContent: { error: { code: 'QUOTA_EXCEEDED', retryAfter: expect.any(Number) } } });
  });

  it('POST /v1/calls refused by the Redis budget with nothing kept to expire (no retryAfter) answers 403, as MCP refuses it a task', async () => {
    // Session 32, A3: the workspace's budget sum stands past its cap with no entry in its ledger
    // (nothing expires first, so the refusal cannot say when): a 200 envelope on main, a call's
    // outcome, where every other bound's refusal before taking is an HTTP error and MCP gives it no task.
    const key = await k.agentKey('swollen', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    await k.redis.set(keysFor(sb.config.prefix).redisBudget('swollen').held, String(10 * 1024 * 1024), 'PX', 120_000);
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer ${key}` },
      payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } },
    });
    expect(res.json()).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    expect(res.json().error.retryAfter).toBeUndefined();
    expect(res.statusCode).toBe(403);
    expect(res.headers['retry-after']).toBeUndefined();

    // The same refusal over MCP as a task: no task, a protocol error not to send again as it is.
    const mcp = await k.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' }, task: {} } },
    });
    expect(mcp.json().error).toMatchObject({ code: -32602, message: expect.stringContaining('QUOTA_EXCEEDED') });
  });

  it("a restore refused by the workspace's disk quota answers 403 without Retry-After, over the API and on the web page", async () => {
    const admin = await k.memberKey('fat', 'ada', 'admin');
    const at = new Date().toISOString();
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/databases/fat%2Fscout/restore',
      headers: { authorization: `Bearer ${admin}` },
      payload: { at, into: 'fat/copy' },
    });
    expect(res.json()).toMatchObject({ error: { code: 'QUOTA_EXCEEDED', message: expect.stringMatching(/Restore of fat\/scout into fat\/copy refused/) } });
    expect(res.json().error.retryAfter).toBeUndefined();
    expect(res.statusCode).toBe(403);
    expect(res.headers['retry-after']).toBeUndefined();

    // A web page at the plans' rates: a restore counts 50 calls, past the one a window of `web`.
    const planned = await startWebServer(sb);
    try {
      const { cookie, csrf } = await webAdmin('fat', 'fat/scout', planned);
      const page = await fetch(`${planned.url}/data/history/restore`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, origin: planned.url, accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, db: 'fat/scout', at, confirm: 'fat/scout' }).toString(),
      });
      expect(await page.text()).toContain('QUOTA_EXCEEDED');
      expect(page.status).toBe(403);
      expect(page.headers.get('retry-after')).toBeNull();
    } finally {
      await planned.close();
    }
  });
});

describe('the web history pages past the rate limits', () => {
  // Session 28 noted they answered 429 without Retry-After, where the data pages said when.
  it('answer RATE_LIMITED with Retry-After, as the data pages do', async () => {
    expect(
      await client.call({
        workspace: 'busy',
        agent: 'scout',
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE t (x)' },
      }),
    ).toMatchObject({
      ok: true,
    });
    // The first page (a tenth) is webAdmin's.
    const { cookie } = await webAdmin('busy', 'busy/scout');
    let refused: Response | undefined;
    for (let i = 0; i < 12 && !refused; i++) {
      const r = await fetch(`${web.url}/data/history?db=busy%2Fscout`, { headers: { cookie, accept: 'text/html' } });
      if (r.status === 200) await r.arrayBuffer();
      else refused = r;
    }
    expect(refused?.status).toBe(429);
    expect(await refused!.text()).toContain('RATE_LIMITED');
    expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
