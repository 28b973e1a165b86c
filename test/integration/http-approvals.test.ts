import type { FastifyInstance } from 'fastify';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalService } from '../../src/approvals/approval-service.ts';
import type { MemberRegistry } from '../../src/registry/members.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import { buildApp } from '../../src/http/app.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withApprovalsApp } from '../helpers/approvals-app.ts';

let sb: Sandbox;
let redis: Redis;
let client: AgentDbClient;
let members: MemberRegistry;
let approvals: ApprovalService;
let app: FastifyInstance;
let key: Record<string, string>;

withApprovalsApp(
  {
    members: [
      ['acme', 'ada', 'admin'],
      ['acme', 'bob', 'member'],
      ['acme', 'cy', 'member'],
      ['other', 'oz', 'admin'],
    ],
  },
  (box) => ({ sb, redis, client, members, approvals, app, key } = box),
);

beforeAll(async () => {
  // The shared table a drop will be parked for: a drop of a table that does not exist is
  // refused before anyone is asked.
  const made = await client.call({
    workspace: 'acme',
    agent: 'builder',
    settings: { database: 'workspace', sharedData: true },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'CREATE TABLE shared_leads (id INTEGER PRIMARY KEY)', scope: 'workspace' },
  });
  expect(made).toMatchObject({ ok: true });
});

/** Parks a call and answers its approval id. */
async function park(input: CallInput): Promise<string> {
  const answer = await client.call(input, { wait: false });
  expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval', approval: { id: expect.any(String) } });
  return (answer as unknown as { approval: { id: string } }).approval.id;
}

let writes = 0;
/** A write by agent `scout` of acme that waits for a person. */
function parkWrite(workspace = 'acme'): Promise<string> {
  writes += 1;
  return park({
    workspace,
    agent: 'scout',
    settings: { database: 'agent', approval: 'write' },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: `CREATE TABLE t${writes} (x INTEGER)`, rationale: 'keep notes' },
  });
}

const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const decide = (id: string, k: string | undefined, payload: unknown) =>
  app.inject({
    method: 'POST',
    url: `/v1/approvals/${id}/decision`,
    headers: k === undefined ? {} : bearer(k),
    payload: payload as Record<string, unknown>,
  });

describe('authentication', () => {
  it('answers 401 UNAUTHENTICATED for a missing, malformed, unknown or revoked key', async () => {
    const { key: gone } = await members.add('acme', 'gone', 'member');
    await members.revoke('acme', 'gone');
    const cases: Record<string, string>[] = [
      {},
      { authorization: key.ada! },
      { authorization: `Basic ${key.ada}` },
      { authorization: 'Bearer ' },
      { authorization: 'Bearer adb_not-a-key' },
      bearer(`adb_${'x'.repeat(43)}`),
      bearer(gone),
    ];
    for (const headers of cases) {
      const res = await app.inject({ method: 'GET', url: '/v1/approvals', headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.json()).toEqual({ error: { code: 'UNAUTHENTICATED', message: expect.any(String), hint: expect.any(String) } });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(res.body).not.toContain(key.ada!);
    }
  });

  it('tells an agent key, the usual mistake, that approvals take a member key, as it tells any bad key', async () => {
    await new WorkspaceRegistry(redis, keysFor(sb.config.prefix)).put('acme', 'pro');
    const agents = new AgentRegistry(redis, keysFor(sb.config.prefix));
    await agents.put('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    const agentKey = (await new AgentKeyRing(redis, keysFor(sb.config.prefix), agents).mint('acme', 'scout')).key;
    const asAgent = await app.inject({ method: 'GET', url: '/v1/approvals', headers: bearer(agentKey) });
    const unknown = await app.inject({ method: 'GET', url: '/v1/approvals', headers: bearer(`adb_${'y'.repeat(43)}`) });
    expect(asAgent.statusCode).toBe(401);
    expect(asAgent.json().error.message).toContain("not an active member key: unknown, revoked, or an agent's key");
    expect(asAgent.json()).toEqual(unknown.json());
  });

  it('checks the key before the body: a bad key with a bad body is still 401', async () => {
    const res = await decide('ap_x', 'adb_nope', { decision: 'maybe' });
    expect(res.statusCode).toBe(401);
  });

  it('logs refusals at info with their code, and never a key', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
    const logged = buildApp({ redis, shardCount: sb.config.shardCount, members, approvals, logger: pino({ level: 'info' }, sink) });
    try {
      await logged.inject({ method: 'GET', url: '/v1/approvals', headers: { authorization: `Bearer ${key.oz}x` } });
      await logged.inject({ method: 'GET', url: '/v1/approvals?workspace=acme', headers: bearer(key.oz!) });
      await logged.inject({ method: 'POST', url: '/v1/approvals/ap_x/decision', headers: bearer(key.oz!), payload: { decision: 'approve' } });
    } finally {
      await logged.close();
    }
    const all = lines.join('');
    expect(all).toContain('"code":"UNAUTHENTICATED"');
    expect(all).toContain('"code":"NOT_PERMITTED"');
    expect(all).toContain('"code":"NOT_FOUND"');
    expect(all).not.toContain(key.oz!.slice(4));
    expect(all).not.toMatch(/"level":50/);
  });

  it('leaves /health open', async () => {
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(200);
  });
});

describe('GET /v1/approvals', () => {
  it("lists the member's own workspace by default, newest first", async () => {
    const first = await parkWrite();
    const second = await parkWrite();
    await parkWrite('other');
    const res = await app.inject({ method: 'GET', url: '/v1/approvals', headers: bearer(key.bob!) });
    expect(res.statusCode).toBe(200);
    const { approvals: list } = res.json() as { approvals: { id: string; workspace: string; state: string }[] };
    expect(list.every((a) => a.workspace === 'acme' && a.state === 'pending')).toBe(true);
    const ids = list.map((a) => a.id);
    expect(ids.indexOf(second)).toBeLessThan(ids.indexOf(first));
    expect(list.find((a) => a.id === first)).toMatchObject({ tool: 'DATA_WRITE_SQL', tier: 'write', agent: 'scout', rationale: 'keep notes' });
  });

  it("refuses another workspace's approvals with 403 NOT_PERMITTED", async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/approvals?workspace=other', headers: bearer(key.ada!) });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('NOT_PERMITTED');
  });

  it('answers 400 INVALID_ARGUMENTS for a bad state or an unknown parameter', async () => {
    for (const url of ['/v1/approvals?state=maybe', '/v1/approvals?status=all', '/v1/approvals?workspace=../x']) {
      const res = await app.inject({ method: 'GET', url, headers: bearer(key.bob!) });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('INVALID_ARGUMENTS');
    }
  });
});

describe('POST /v1/approvals/:id/decision', () => {
  it('approves as the key holder; a second decision gets 409 APPROVAL_CONFLICT', async () => {
    const id = await parkWrite();
    const res = await decide(id, key.bob, { decision: 'approve', reason: 'looks fine' });
    expect(res.statusCode).toBe(200);
    expect(res.json().approval).toMatchObject({ id, state: 'approved', decidedBy: 'bob', reason: 'looks fine' });
    const again = await decide(id, key.cy, { decision: 'reject' });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.code).toBe('APPROVAL_CONFLICT');
    expect((await approvals.get(id))?.decidedBy).toBe('bob');
  });

  it('rejects with a reason', async () => {
    const id = await parkWrite();
    const res = await decide(id, key.cy, { decision: 'reject', reason: 'not today' });
    expect(res.statusCode).toBe(200);
    expect(res.json().approval).toMatchObject({ state: 'rejected', decidedBy: 'cy', reason: 'not today' });
  });

  it('answers a member of another workspace as if the approval did not exist, and it stays pending', async () => {
    const id = await parkWrite();
    const res = await decide(id, key.oz, { decision: 'approve' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
    expect((await approvals.get(id))?.state).toBe('pending');
  });

  it('lets only an admin decide a shared drop', async () => {
    const id = await park({
      workspace: 'acme',
      agent: 'builder',
      settings: { database: 'workspace', sharedData: true },
      tool: 'DATA_DROP_TABLE',
      arguments: { table: 'shared_leads', scope: 'workspace' },
    });
    expect(await approvals.get(id)).toMatchObject({ tier: 'destructive', shared: true });
    const plain = await decide(id, key.bob, { decision: 'approve' });
    expect(plain.statusCode).toBe(403);
    expect(plain.json().error.code).toBe('NOT_PERMITTED');
    expect((await approvals.get(id))?.state).toBe('pending');
    const admin = await decide(id, key.ada, { decision: 'reject', reason: 'keep it' });
    expect(admin.statusCode).toBe(200);
    expect(admin.json().approval).toMatchObject({ state: 'rejected', decidedBy: 'ada' });
  });

  it('answers 404 NOT_FOUND for an unknown approval', async () => {
    const res = await decide('ap_00000000-0000-0000-0000-000000000000', key.ada, { decision: 'approve' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('answers 400 INVALID_ARGUMENTS for a bad body, and the approval stays pending', async () => {
    const id = await parkWrite();
    const bodies: unknown[] = [{}, { decision: 'maybe' }, { decision: 'approve', reason: 7 }, { decision: 'approve', by: 'ada' }];
    for (const payload of bodies) {
      const res = await decide(id, key.ada, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.code).toBe('INVALID_ARGUMENTS');
    }
    const notJson = await app.inject({
      method: 'POST',
      url: `/v1/approvals/${id}/decision`,
      headers: { ...bearer(key.ada!), 'content-type': 'application/json' },
      payload: '{"decision":',
    });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().error.code).toBe('INVALID_ARGUMENTS');
    expect((await approvals.get(id))?.state).toBe('pending');
  });

  it('lists decided approvals with state=all', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/approvals?state=all', headers: bearer(key.ada!) });
    const states = new Set((res.json().approvals as { state: string }[]).map((a) => a.state));
    expect(states).toContain('approved');
    expect(states).toContain('rejected');
    expect(states).toContain('pending');
  });

  it('pages with limit, newest first', async () => {
    const all = (await app.inject({ method: 'GET', url: '/v1/approvals?state=all', headers: bearer(key.ada!) })).json().approvals as { id: string }[];
    expect(all.length).toBeGreaterThan(2);
    const page = await app.inject({ method: 'GET', url: '/v1/approvals?state=all&limit=2', headers: bearer(key.ada!) });
    expect((page.json().approvals as { id: string }[]).map((a) => a.id)).toEqual(all.slice(0, 2).map((a) => a.id));
    const bad = await app.inject({ method: 'GET', url: '/v1/approvals?limit=0', headers: bearer(key.ada!) });
    expect(bad.statusCode).toBe(400);
  });

  it('pages with a cursor: every approval once, in order; a page holds at most 200 (issue 27: limit=10000 answered 40 MB)', async () => {
    const all = (await app.inject({ method: 'GET', url: '/v1/approvals?state=all', headers: bearer(key.ada!) })).json().approvals as { id: string }[];
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const res = await app.inject({ method: 'GET', url: `/v1/approvals?state=all&limit=2${cursor ? `&cursor=${cursor}` : ''}`, headers: bearer(key.ada!) });
      const body = res.json() as { approvals: { id: string }[]; nextCursor?: string };
      expect(body.approvals.length).toBeLessThanOrEqual(2);
      seen.push(...body.approvals.map((a) => a.id));
      cursor = body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(all.map((a) => a.id));
    for (const url of ['/v1/approvals?limit=10000', '/v1/approvals?limit=201', '/v1/approvals?cursor=nonsense']) {
      const res = await app.inject({ method: 'GET', url, headers: bearer(key.ada!) });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('INVALID_ARGUMENTS');
    }
  });

  it('cuts big SQL and params in a list, with cut: true; GET /v1/approvals/:id answers the record whole', async () => {
    const sql = `INSERT INTO notes (body) VALUES (?) /* ${'n'.repeat(3000)} */`;
    const params = ['p'.repeat(20_000)];
    const id = await park({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'agent', approval: 'write' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE IF NOT EXISTS notes (body TEXT)' },
    });
    await decide(id, key.ada, { decision: 'approve' });
    const big = await park({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'agent', approval: 'write' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql, params },
    });
    const res = await app.inject({ method: 'GET', url: '/v1/approvals', headers: bearer(key.ada!) });
    const listed = (res.json().approvals as { id: string; sql: string; params: string[]; cut?: boolean }[]).find((a) => a.id === big)!;
    expect(listed.cut).toBe(true);
    expect(listed.sql.length).toBeLessThan(1100);
    expect(listed.sql).toMatch(/…\[\d+ chars cut\]$/);
    expect(JSON.stringify(listed.params).length).toBeLessThan(400);
    const whole = await app.inject({ method: 'GET', url: `/v1/approvals/${big}`, headers: bearer(key.bob!) });
    expect(whole.statusCode).toBe(200);
    expect(whole.json().approval).toMatchObject({ id: big, sql, params });
    expect(whole.json().approval.cut).toBeUndefined();
    // Another workspace's member: as if it did not exist.
    const other = await app.inject({ method: 'GET', url: `/v1/approvals/${big}`, headers: bearer(key.oz!) });
    expect(other.statusCode).toBe(404);
    expect(other.json().error.code).toBe('NOT_FOUND');
  });

  it('answers unknown routes with a coded 404', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/nothing', headers: bearer(key.ada!) });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });
});
