import Fastify, { type FastifyInstance } from 'fastify';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fastToolCall } from '../../src/http/mcp-fast-call.ts';
import { mcpRoutes, type McpRoutesDeps } from '../../src/http/mcp-routes.ts';
import { mcpWaiting } from '../../src/mcp/waiting-calls.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { KeyAuthenticator, type Principal } from '../../src/registry/principal.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// `/mcp`'s fast path (src/http/mcp-fast-call.ts) answers a plain tools/call without the SDK
// Server; it must answer what the SDK path answers, to the byte. The same routes are served
// twice, under /fast with the fast path and under /sdk without it, over the same Redis, workers
// and keys, and every kind of outcome is posted to both: the answers must be equal once the
// values that differ between any two calls (call ids, the fence's random boundary) are masked.
// A joined resend goes across the two paths, so those answers are compared unmasked.

let sb: Sandbox;
let k: KeyedApp;
let app: FastifyInstance;
let base: string;
const key: Record<string, string> = {};

/** A member key whose principal is the one an OAuth grant of "read" gives (INSUFFICIENT_SCOPE for a write). */
let readGrantKey = '';

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  key.reader = await k.agentKey('acme', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent' } });
  key.gated = await k.agentKey('acme', 'gated', {
    displayName: 'Gated',
    settings: { database: 'agent' },
    surface: { kind: 'db', mode: 'write', policy: 'require-approval' },
  });
  key.bob = await k.memberKey('acme', 'bob', 'member');
  readGrantKey = await k.memberKey('acme', 'carol', 'member');
  for (const [agent, sql] of [
    ['reader', "CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO kv VALUES (1, 'one')"],
    ['careful', 'CREATE TABLE j (id INTEGER PRIMARY KEY, x TEXT)'],
    ['gated', 'CREATE TABLE g (id INTEGER PRIMARY KEY, x TEXT)'],
  ] as const) {
    for (const statement of sql.split('; ')) {
      const made = await k.client.call({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: statement } });
      expect(made).toMatchObject({ ok: true });
    }
  }
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });

  const keys = keysFor(sb.config.prefix);
  const real = new KeyAuthenticator(k.redis, keys, k.principals);
  // The principal an OAuth token granted "read" resolves to (src/oauth/oauth-grants.ts).
  const auth = {
    authenticate: async (token: string): Promise<Principal | undefined> => {
      const p = await real.authenticate(token);
      return p && token === readGrantKey && p.kind === 'member' ? { ...p, member: { ...p.member, granted: 'read' } } : p;
    },
  } as unknown as KeyAuthenticator;
  const deps: McpRoutesDeps = {
    auth,
    calls: k.calls,
    // Long enough for a write to be taken and parked on a loaded machine (the wait covers both):
    // with 300 ms a busy CI answered `running` where the test looks for the pending answer.
    approvalWaitMs: 2000,
    waiting: mcpWaiting({ redis: k.redis, keys, calls: k.calls, approvalTtlMs: sb.config.approvalTtlMs, resultTtlS: sb.config.resultTtlS }),
  };
  app = Fastify();
  app.register(mcpRoutes(deps), { prefix: '/fast' });
  app.register(mcpRoutes({ ...deps, fastPath: false }), { prefix: '/sdk' });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await app?.close();
  await k.close();
  await sb.cleanup();
});

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
const toolCall = (name: string, args: unknown, extra: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: { name, arguments: args, ...extra },
});

interface Answer {
  status: number;
  type: string | null;
  text: string;
}

async function post(path: 'fast' | 'sdk', bearer: string, body: unknown, headers: Record<string, string> = {}, at = '/mcp'): Promise<Answer> {
  const r = await fetch(new URL(`/${path}${at}`, base), {
    method: 'POST',
    headers: { ...HEADERS, authorization: `Bearer ${bearer}`, ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

/** What differs between any two answers, even of one call: the fence's random boundary. */
const unfenced = (a: Answer): Answer => ({ ...a, text: a.text.replace(/untrusted-data-[0-9a-f]{24}/g, 'untrusted-data-<b>') });

/** What differs between any two calls besides: their ids and the times they were made. */
const masked = (a: Answer): Answer => ({
  ...a,
  text: a.text
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<call id>')
    .replace(/untrusted-data-[0-9a-f]{24}/g, 'untrusted-data-<b>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, '<time>'),
});

/** Posts the same request down both paths (fast first) and answers both, after checking which path the fast route took. */
async function both(bearer: string, body: unknown, o: { headers?: Record<string, string>; at?: string; fast: boolean }): Promise<[Answer, Answer]> {
  const taken = fastToolCall({ headers: { ...HEADERS, ...o.headers }, body });
  expect(taken !== undefined && !('invalid' in taken), 'whether the fast path takes it').toBe(o.fast);
  const fast = await post('fast', bearer, body, o.headers, o.at);
  const sdk = await post('sdk', bearer, body, o.headers, o.at);
  return [fast, sdk];
}

async function same(bearer: string, body: unknown, o: { headers?: Record<string, string>; at?: string; fast?: boolean } = {}): Promise<Answer> {
  const [fast, sdk] = await both(bearer, body, { fast: true, ...o });
  expect(masked(fast)).toEqual(masked(sdk));
  return fast;
}

const json = (a: Answer) => JSON.parse(a.text) as { result?: { isError?: boolean; structuredContent?: Record<string, unknown> }; error?: { code: number } };

async function pendingApprovals(agent: string): Promise<string[]> {
  return (await k.approvals.list({ state: 'pending', workspace: 'acme' })).filter((a) => a.agent === agent).map((a) => a.id);
}

describe("/mcp's fast path answers tools/call as the SDK path does", () => {
  it('a read: the fenced rows and their structuredContent', async () => {
    const a = await same(key.reader!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT v FROM kv WHERE id = ?', params: [1] }));
    expect(json(a).result).toMatchObject({ isError: false, structuredContent: { rows: [['one']], untrusted: true } });
    expect(a.status).toBe(200);
  });

  it('an SQL error (its message fenced), and arguments the tool refuses', async () => {
    expect(json(await same(key.reader!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT * FROM nowhere' }))).result).toMatchObject({ isError: true });
    const bad = await same(key.reader!, toolCall('DATA_QUERY_SQL', { sqlx: 1 }));
    expect(json(bad).result).toMatchObject({ isError: true, structuredContent: { error: { code: 'INVALID_ARGUMENTS' } } });
    const noArgs = await same(key.reader!, toolCall('DATA_QUERY_SQL', undefined));
    expect(json(noArgs).result).toMatchObject({ isError: true });
  });

  it('an unknown tool, here and on a team endpoint, as a protocol error', async () => {
    expect(json(await same(key.reader!, toolCall('NO_SUCH_TOOL', {}))).error).toMatchObject({ code: -32602 });
    expect(json(await same(key.bob!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }), { at: '/mcp/t/ops' })).error).toMatchObject({ code: -32602 });
  });

  it('a call id of its own in _meta, good and bad', async () => {
    const meta = (id: unknown) => ({ _meta: { 'agentdb/callId': id } });
    const own = await same(key.reader!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT 2 AS n' }, meta(crypto.randomUUID())));
    expect(json(own).result).toMatchObject({ isError: false, structuredContent: { rows: [[2]] } });
    // The same id down both paths: the second answers the first's outcome.
    const id = crypto.randomUUID();
    const [first, again] = await both(key.reader!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT 3 AS n' }, meta(id)), { fast: true });
    expect(masked(first)).toEqual(masked(again));
    expect(json(again).result?.structuredContent).toMatchObject({ callId: id });
    const bad = await same(key.reader!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }, meta(42)));
    expect(json(bad).result).toMatchObject({ isError: true, structuredContent: { error: { code: 'INVALID_ARGUMENTS' } } });
  });

  it("a write beyond an OAuth grant's scope: INSUFFICIENT_SCOPE", async () => {
    const a = await same(readGrantKey, toolCall('DATA_WRITE_SQL', { sql: 'CREATE TABLE t (x)', scope: 'workspace' }));
    expect(json(a).result).toMatchObject({ isError: true, structuredContent: { error: { code: 'INSUFFICIENT_SCOPE' } } });
  });

  it('a parked write answers pending, a resend on the other path joins it (one approval), and the outcome once decided', async () => {
    const outcomes: Answer[] = [];
    for (const [first, then, x] of [
      ['fast', 'sdk', 'a'],
      ['sdk', 'fast', 'b'],
    ] as const) {
      const body = toolCall('DATA_WRITE_SQL', { sql: `INSERT OR REPLACE INTO j VALUES (1, '${x}')` });
      const pending = await post(first, key.careful!, body);
      expect(json(pending).result?.structuredContent).toMatchObject({ status: 'awaiting_approval' });
      const joined = await post(then, key.careful!, body);
      // Unmasked: the same call and the same approval.
      expect(joined).toEqual(pending);
      const approvals = await pendingApprovals('careful');
      expect(approvals).toHaveLength(1);
      expect(await k.client.decide(approvals[0]!, { decision: 'approve', key: key.bob! })).toMatchObject({ ok: true });
      const outcome = await post(first, key.careful!, body);
      expect(json(outcome).result).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
      outcomes.push(outcome);
    }
    expect(masked(outcomes[0]!)).toEqual(masked(outcomes[1]!));
  });

  it("db_exec's require-approval refusal, and its resend joining it", async () => {
    const body = toolCall('db_exec', { statement: "INSERT INTO g VALUES (1, 'g')", rationale: 'both paths' });
    const [fast, sdk] = await both(key.gated!, body, { fast: true });
    expect(json(fast).result).toMatchObject({ isError: true, structuredContent: { error: { code: 'APPROVAL_REQUIRED' } } });
    // Unmasked but for the fence: the same call and the same approval.
    expect(unfenced(sdk)).toEqual(unfenced(fast));
    expect(await pendingApprovals('gated')).toHaveLength(1);
  });

  it('a call told plain by looking at it is the request the schemas give; one they must decide is parsed', async () => {
    // The fast path takes a plain call without JSONRPCMessageSchema's and CallToolRequestSchema's
    // parses (mcp-fast-call.ts): what it hands the handler must be what the parse gives.
    const plainOnes = [
      toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1', params: [null] }),
      { ...toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }), id: 'an-id' },
      toolCall('DATA_QUERY_SQL', undefined, { _meta: { 'agentdb/callId': crypto.randomUUID(), traceparent: 'x' } }),
    ];
    const parsedOnes = [
      toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { _meta: { progressToken: 5 } }),
      toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { extra: 1 }),
    ];
    for (const body of [...plainOnes, ...parsedOnes]) {
      const taken = fastToolCall({ headers: HEADERS, body });
      expect(taken && 'request' in taken ? taken : undefined).toEqual({ id: body.id, request: CallToolRequestSchema.parse(body) });
      await same(key.reader!, body);
    }
    // Neither looks nor schemas take these: the SDK's answer on both paths.
    for (const body of [
      { ...toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }), more: 1 },
      { ...toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }), id: 1.5 },
      { ...toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }), id: 2 ** 53 },
      toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { _meta: { progressToken: 1.5 } }),
      toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { _meta: [] }),
    ]) {
      expect((await same(key.reader!, body, { fast: false })).status).toBe(400);
    }
  });

  it('bodies only raw JSON can carry (prototype keys, repeated members, odd ids, huge numbers, a notification): the same answer both ways', async () => {
    // JSON.parse keeps `__proto__` as a member of its own and the last of repeated members;
    // the schemas' parse copies objects and drops `__proto__`. Neither may let one path run
    // what the other refuses, nor answer otherwise (Fastify refuses prototype keys first).
    const call = (params: string, id = '7') => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":${params}}`;
    const q = '"name":"DATA_QUERY_SQL"';
    for (const raw of [
      call(`{${q},"arguments":{"__proto__":{"sql":"SELECT 1"}}}`),
      call(`{${q},"arguments":{"sql":"SELECT 1"},"_meta":{"__proto__":{"progressToken":5}}}`),
      call(`{${q},"arguments":{"sql":"SELECT 1","constructor":{"prototype":{"x":1}}}}`),
      call(`{"name":"DATA_WRITE_SQL",${q},"arguments":{"sql":"CREATE TABLE dup (x)","sql":"SELECT 4 AS n"}}`),
      call(`{${q},"arguments":{"sql":"SELECT ? AS n","params":[1e400]}}`),
      call(`{${q},"arguments":{"sql":"SELECT ? AS n","params":[123456789012345678901234567890]}}`),
      call(`{${q},"arguments":{"sql":"SELECT 1"}}`, '-0'),
      call(`{${q},"arguments":{"sql":"SELECT 1"}}`, '1e3'),
      call(`{${q},"arguments":{"sql":"SELECT 1"}}`, '9007199254740991'),
      call(`{${q},"arguments":{"sql":"SELECT 1"}}`, '""'),
      call(`{${q},"arguments":{"sql":"SELECT 1"}}`, 'null'),
      call(`{${q},"arguments":{"sql":"SELECT 1"}}`, '{"a":1}'),
      `{"jsonrpc":"2.0","method":"tools/call","params":{${q},"arguments":{"sql":"SELECT 1"}}}`,
      `{"jsonrpc":"2.0","id":1,"id":"x","method":"tools/list","method":"tools/call","params":{${q},"arguments":{"sql":"SELECT 5 AS n"}}}`,
    ]) {
      const [fast, sdk] = await Promise.all(
        (['fast', 'sdk'] as const).map((path) =>
          app.inject({ method: 'POST', url: `/${path}/mcp`, headers: { ...HEADERS, authorization: `Bearer ${key.reader}` }, payload: raw }),
        ),
      );
      expect(fast!.statusCode, raw).toBeLessThan(500);
      expect(masked({ status: fast!.statusCode, type: null, text: fast!.body }), raw).toEqual(masked({ status: sdk!.statusCode, type: null, text: sdk!.body }));
    }
  });

  it('what the fast path leaves to the SDK: other methods, tasks, bad requests, batches, checks of the POST', async () => {
    const read = toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' });
    await same(key.reader!, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { fast: false });
    await same(key.reader!, { jsonrpc: '2.0', method: 'notifications/initialized' }, { fast: false });
    await same(key.reader!, toolCall('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { task: { ttl: 60_000 } }), { fast: false });
    // Params the tools/call schema refuses: JSON-RPC's Invalid params on both paths, not the SDK's
    // -32603 with zod's issues as JSON (review R28).
    for (const params of [{ arguments: {} }, { name: 5 }, { name: 'DATA_QUERY_SQL', arguments: [] }, { name: 'DATA_QUERY_SQL', arguments: 'x' }]) {
      const answer = await same(key.reader!, { jsonrpc: '2.0', id: 1, method: 'tools/call', params }, { fast: false });
      expect(JSON.parse(answer.text)).toMatchObject({ id: 1, error: { code: -32602, message: expect.stringMatching(/^Invalid params: \S/) } });
    }
    await same(key.reader!, [read], { fast: false });
    await same(key.reader!, { ...read, jsonrpc: '1.0' }, { fast: false });
    await same(key.reader!, read, { headers: { 'mcp-protocol-version': '1999-01-01' }, fast: false });
    await same(key.reader!, read, { headers: { accept: 'text/event-stream' }, fast: false });
    await same(key.reader!, read, { headers: { accept: 'application/json' }, fast: false });
    // Refused before either path: by Origin, Host and key.
    expect((await same(key.reader!, read, { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    // (fetch sends its own Host: this one is injected.)
    const [fastHost, sdkHost] = await Promise.all(
      (['fast', 'sdk'] as const).map((path) =>
        app.inject({
          method: 'POST',
          url: `/${path}/mcp`,
          headers: { ...HEADERS, host: 'evil.example', authorization: `Bearer ${key.reader}` },
          payload: read,
        }),
      ),
    );
    expect(fastHost!.statusCode).toBe(403);
    expect([fastHost!.statusCode, fastHost!.body]).toEqual([sdkHost!.statusCode, sdkHost!.body]);
    expect((await same('adb_not_a_key', read)).status).toBe(401);
  });
});
