import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// A person approves a statement; the right to run it is the registry's, and it may narrow while
// the call waits. An approved call made with an agent key is judged again when it is released.

let sb: Sandbox;
let k: KeyedApp;
let agents: AgentRegistry;
let ring: AgentKeyRing;
let store: ApprovalStore;

const WS = 'acme';
const granted = { displayName: 'Parker', settings: { database: 'workspace', approval: 'write', sharedData: true } } as const;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb, { waitMs: 20_000 });
  const keys = keysFor(sb.config.prefix);
  agents = new AgentRegistry(k.redis, keys);
  ring = new AgentKeyRing(k.redis, keys, agents);
  store = new ApprovalStore(k.redis, keys);
  await k.memberKey(WS, 'alice', 'admin');
  const made = await sb.client().call({
    workspace: WS,
    agent: 'setup',
    settings: { database: 'workspace', sharedData: true },
    tool: 'DATA_WRITE_SQL',
    arguments: { scope: 'workspace', sql: 'CREATE TABLE shared_notes (id INTEGER PRIMARY KEY, body TEXT)' },
  });
  expect(made).toMatchObject({ ok: true });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const post = (bearer: string, payload: unknown) =>
  k.app.inject({ method: 'POST', url: '/v1/calls?wait=false', headers: { authorization: `Bearer ${bearer}` }, payload: payload as object });

/** Parks `INSERT INTO shared_notes` as `slug` (a fresh key), answering the key, call id and approval id. */
async function park(slug: string, body: string): Promise<{ key: string; callId: string; approvalId: string; since: number }> {
  const key = await k.agentKey(WS, slug, granted);
  const since = (await agents.get(WS, slug))!.createdAt;
  const r = await post(key, { tool: 'DATA_WRITE_SQL', arguments: { scope: 'workspace', sql: 'INSERT INTO shared_notes (body) VALUES (?)', params: [body] } });
  const answer = r.json() as { status?: string; callId: string; approval?: { id: string } };
  expect(answer).toMatchObject({ status: 'awaiting_approval' });
  return { key, callId: answer.callId, approvalId: answer.approval!.id, since };
}

/**
 * Approves and waits for the call's final envelope, a keyed call's looked up under its agent's
 * registration (which it is keyed by, `callKey`), read before a test removes the agent.
 */
async function approveAndFinish(slug: string, p: { callId: string; approvalId: string; since?: number }) {
  expect(await k.client.decide(p.approvalId, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
  return k.client.result(p.callId, { workspace: WS, agent: slug, ...(p.since !== undefined ? { memberSince: p.since } : {}), wait: true, timeoutMs: 20_000 });
}

async function rowsWith(body: string): Promise<number> {
  const answer = await sb.client().call({
    workspace: WS,
    agent: 'reader',
    settings: { database: 'workspace' },
    tool: 'DATA_QUERY_SQL',
    arguments: { scope: 'workspace', sql: 'SELECT count(*) AS n FROM shared_notes WHERE body = ?', params: [body] },
  });
  expect(answer).toMatchObject({ ok: true });
  return Number((answer as unknown as { result: { rows: unknown[][] } }).result.rows[0]![0]);
}

describe('an approved call made with an agent key is checked again when released', () => {
  it('refuses it when the agent lost the shared-data grant meanwhile, and the approval says why', async () => {
    const p = await park('parker', 'narrowed');
    await agents.put(WS, 'parker', { ...granted, settings: { database: 'workspace', approval: 'write' } });
    const done = await approveAndFinish('parker', p);
    expect(done).toMatchObject({ ok: false, error: { code: 'NOT_PERMITTED' } });
    expect((done as { error: { message: string } }).error.message).toMatch(/since it was parked.*shared-data grant/);
    expect(await rowsWith('narrowed')).toBe(0);
    const approval = await store.get(p.approvalId);
    expect(approval).toMatchObject({ state: 'approved', ran: { ok: false, code: 'NOT_PERMITTED', detail: expect.stringMatching(/since it was parked/) } });
  });

  it('refuses it when its key was revoked meanwhile', async () => {
    const p = await park('revoked', 'revoked');
    const [{ id }] = await ring.list(WS, 'revoked');
    expect(await ring.revoke(WS, id!)).toBe(true);
    const done = await approveAndFinish('revoked', p);
    expect(done).toMatchObject({ ok: false, error: { code: 'NOT_PERMITTED', message: expect.stringMatching(/was revoked/) } });
    expect(await rowsWith('revoked')).toBe(0);
  });

  it('refuses it when the agent was removed meanwhile', async () => {
    const p = await park('removed', 'removed');
    expect(await agents.remove(WS, 'removed')).toBe(true);
    const done = await approveAndFinish('removed', p);
    expect(done).toMatchObject({ ok: false, error: { code: 'NOT_PERMITTED', message: expect.stringMatching(/agent "removed" was removed/) } });
    expect(await rowsWith('removed')).toBe(0);
  });

  it('runs it when nothing changed', async () => {
    const p = await park('steady', 'steady');
    expect(await approveAndFinish('steady', p)).toMatchObject({ ok: true });
    expect(await rowsWith('steady')).toBe(1);
  });

  it('keeps the settings a runtime passed with a call made without a key', async () => {
    const parked = await sb.client().call(
      {
        workspace: WS,
        agent: 'runtime',
        settings: { database: 'workspace', approval: 'write', sharedData: true },
        tool: 'DATA_WRITE_SQL',
        arguments: { scope: 'workspace', sql: 'INSERT INTO shared_notes (body) VALUES (?)', params: ['runtime'] },
      },
      { wait: false },
    );
    expect(parked).toMatchObject({ status: 'awaiting_approval' });
    const p = parked as { callId: string; approval: { id: string } };
    expect(await approveAndFinish('runtime', { callId: p.callId, approvalId: p.approval.id })).toMatchObject({ ok: true });
    expect(await rowsWith('runtime')).toBe(1);
  });

  it('is flagged in the approvals list before anyone decides, once its key is revoked', async () => {
    const alice = await k.memberKey(WS, 'alice-lister', 'admin');
    const listed = async () => {
      const r = await k.app.inject({ method: 'GET', url: '/v1/approvals', headers: { authorization: `Bearer ${alice}` } });
      expect(r.statusCode).toBe(200);
      return (r.json() as { approvals: { id: string; refusedIfApproved?: string }[] }).approvals;
    };
    const p = await park('flagged', 'flagged');
    expect((await listed()).find((a) => a.id === p.approvalId)).not.toHaveProperty('refusedIfApproved');
    const [{ id }] = await ring.list(WS, 'flagged');
    expect(await ring.revoke(WS, id!)).toBe(true);
    const flagged = (await listed()).find((a) => a.id === p.approvalId);
    expect(flagged?.refusedIfApproved).toMatch(/agent key .* was revoked/);
    // And it is what approving then does.
    const done = await approveAndFinish('flagged', p);
    expect(done).toMatchObject({ ok: false, error: { code: 'NOT_PERMITTED', message: expect.stringMatching(/was revoked/) } });
  });
});
