import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

let sb: Sandbox;
let k: KeyedApp;
const key: Record<string, string> = {};

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  key.scout = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  key.ada = await k.memberKey('acme', 'ada', 'admin');
  key.bob = await k.memberKey('acme', 'bob', 'member');
  key.oz = await k.agentKey('other', 'scout', { displayName: 'Other scout', settings: { database: 'agent' } });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const post = (bearer: string | undefined, body: unknown, query = '') =>
  k.app.inject({ method: 'POST', url: `/v1/calls${query}`, headers: bearer ? { authorization: `Bearer ${bearer}` } : {}, payload: body as object });
const get = (bearer: string, id: string, query = '') =>
  k.app.inject({ method: 'GET', url: `/v1/calls/${id}${query}`, headers: { authorization: `Bearer ${bearer}` } });

describe('POST /v1/calls', () => {
  it('runs a tool call with an agent key, with the registered agent’s settings', async () => {
    const made = await post(key.scout, { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE notes (t TEXT)' } });
    expect(made.statusCode).toBe(200);
    expect(made.json()).toMatchObject({ ok: true, tool: 'DATA_WRITE_SQL', credits: 2 });
    await post(key.scout, { tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO notes VALUES (?)', params: ['hi'] } });
    const read = await post(key.scout, { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT t FROM notes' } });
    expect(read.json()).toMatchObject({ ok: true, untrusted: true, result: { columns: ['t'], rows: [['hi']] } });
    // The same database as the runtime's calls for acme/scout.
    expect(
      await k.client.call({
        workspace: 'acme',
        agent: 'scout',
        settings: { database: 'agent' },
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: 'SELECT count(*) AS n FROM notes' },
      }),
    ).toMatchObject({
      ok: true,
      result: { rows: [[1]] },
    });
    // A key holder cannot bring settings of its own.
    const forged = await post(key.scout, { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, settings: { database: 'workspace' } });
    expect(forged.statusCode).toBe(400);
    expect(forged.json()).toMatchObject({ error: { code: 'INVALID_ARGUMENTS' } });
  });

  it('answers tool refusals as envelopes, and the same errors as the client library', async () => {
    const bad = await post(key.scout, { tool: 'DATA_QUERY_SQL', arguments: { sql: 'PRAGMA table_info(notes)' } });
    expect(bad.statusCode).toBe(200);
    expect(bad.json()).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
    expect((await post(key.scout, { tool: 'NOPE' })).json()).toMatchObject({ ok: false, error: { code: 'UNKNOWN_TOOL' } });
    expect((await post(key.bob, { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', scope: 'agent' } })).json()).toMatchObject({
      ok: false,
      error: { code: 'NOT_PERMITTED', message: expect.stringContaining('a client has no database of its own') },
    });
  });

  it('?wait=false answers a parked write at once; the decision releases it; GET ?wait=true waits for it', async () => {
    const parked = await post(key.careful, { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE gated (x)' }, callId: 'gate-1' }, '?wait=false');
    expect(parked.statusCode).toBe(202);
    const answer = parked.json() as { status: string; approval: { id: string } };
    expect(answer).toMatchObject({ ok: false, callId: 'gate-1', status: 'awaiting_approval', approval: { id: expect.any(String) } });
    expect((await get(key.careful, 'gate-1')).json()).toMatchObject({ status: 'awaiting_approval' });

    const done = get(key.careful, 'gate-1', '?wait=true');
    expect(await k.client.decide(answer.approval.id, { decision: 'approve', key: key.ada! })).toMatchObject({ ok: true });
    const finished = await done;
    expect(finished.statusCode).toBe(200);
    expect(finished.json()).toMatchObject({ ok: true, callId: 'gate-1' });
  });

  it('keeps the call-id rules: same payload → same outcome, another payload → IDEMPOTENCY_CONFLICT', async () => {
    const body = { tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO notes VALUES (?)', params: ['once'] }, callId: 'idem-1' };
    const first = (await post(key.scout, body)).json();
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });
    expect((await post(key.scout, body)).json()).toEqual(first);
    expect((await post(key.scout, { ...body, arguments: { ...body.arguments, params: ['twice'] } })).json()).toMatchObject({
      ok: false,
      error: { code: 'IDEMPOTENCY_CONFLICT' },
    });
    // The member's id space is their own, even for the agent's call id.
    expect((await post(key.ada, { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, callId: 'idem-1' })).json()).toMatchObject({ ok: true });
  });

  it('GET finds only the key’s own calls', async () => {
    expect((await get(key.scout, 'idem-1')).json()).toMatchObject({ ok: true, callId: 'idem-1', tool: 'DATA_WRITE_SQL' });
    expect((await get(key.ada, 'idem-1')).json()).toMatchObject({ ok: true, tool: 'DATA_QUERY_SQL' });
    // Same slug and call id in another workspace, another agent, another member: not found.
    for (const other of [key.oz!, key.careful!, key.bob!]) {
      const r = await get(other, 'idem-1');
      expect(r.statusCode).toBe(404);
      expect(r.json()).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
    }
    // Its hint speaks of call ids, not of tables and approvals (session 38, N16).
    const hint: string = (await get(key.scout, 'never-sent')).json().error.hint;
    expect(hint).toMatch(/call id/);
    expect(hint).not.toMatch(/DATA_DESCRIBE_SCHEMA|approvals/);
  });

  it('refuses missing, malformed, unknown and revoked keys alike, before reading the body', async () => {
    const revoked = await k.memberKey('acme', 'gone', 'admin');
    await new MemberRegistry(k.redis, keysFor(sb.config.prefix)).revoke('acme', 'gone');
    const answers = await Promise.all([
      post(revoked, { tool: 'DATA_QUERY_SQL' }),
      post(undefined, { tool: 'DATA_QUERY_SQL' }),
      post('nope', { tool: 'DATA_QUERY_SQL' }),
      post(`adb_${'A'.repeat(43)}`, { tool: 'DATA_QUERY_SQL' }),
      k.app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: 'Basic abc' }, payload: 'not json' }),
    ]);
    for (const r of answers) {
      expect(r.statusCode).toBe(401);
      expect(r.json()).toEqual(answers[0]!.json());
    }
    const bad = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer ${key.scout}`, 'content-type': 'application/json' },
      payload: '{not json',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: { code: 'INVALID_ARGUMENTS' } });
  });
});
