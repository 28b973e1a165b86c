import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { remove as removeAgentCommand } from '../../src/cli/agents.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 28, L1: an agent removed with `agentdb agents remove` left its parked writes pending in
// the inbox, each waiting out its approval, and a person's approval of one a runtime had made by
// the agent's name ran it. Removal now rejects them (fail-closed), with the reason in the approval
// and the caller's APPROVAL_REJECTED; a later decision meets APPROVAL_CONFLICT and runs nothing.

let sb: Sandbox;
let k: KeyedApp;
let store: ApprovalStore;
let agents: AgentRegistry;
const WS = 'acme';
const profile = { displayName: 'Parker', settings: { database: 'agent', approval: 'write' } } as const;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb, { waitMs: 20_000 });
  store = new ApprovalStore(k.redis, keysFor(sb.config.prefix));
  agents = new AgentRegistry(k.redis, keysFor(sb.config.prefix));
  await k.memberKey(WS, 'alice', 'admin');
  // A pool's start on a machine the other suites load took past the default minute.
}, 120_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

/** `agentdb agents remove`, in this process: its output. */
async function removeWithCli(slug: string): Promise<string> {
  const out = new PassThrough();
  let said = '';
  out.on('data', (b: Buffer) => (said += b.toString()));
  expect(await removeAgentCommand({ config: sb.config, stdout: out, stderr: new PassThrough() }, { workspace: WS, agent: slug })).toBe(0);
  return said;
}

describe('an agent removed with parked calls', () => {
  it('has its parked calls rejected with the reason: the caller is told, and an approval after runs nothing', async () => {
    const key = await k.agentKey(WS, 'parker', profile);
    const own = { workspace: WS, agent: 'parker', settings: { database: 'agent' } } as const;
    expect(await k.client.call({ ...own, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE base (v TEXT)' } })).toMatchObject({ ok: true });
    const since = (await agents.get(WS, 'parker'))!.createdAt;
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/calls?wait=false',
      headers: { authorization: `Bearer ${key}` },
      payload: { tool: 'DATA_WRITE_SQL', callId: 'keyed', arguments: { sql: 'CREATE TABLE keyed_t (v TEXT)' } },
    });
    const parked = res.json() as { status: string; approval: { id: string } };
    expect(parked).toMatchObject({ status: 'awaiting_approval' });
    // A runtime calling by the agent's name, with its own settings (no key).
    const byName = await k.client.call(
      {
        workspace: WS,
        agent: 'parker',
        callId: 'by-name',
        settings: profile.settings,
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE runtime_t (v TEXT)' },
      },
      { wait: false },
    );
    expect(byName).toMatchObject({ status: 'awaiting_approval' });
    const runtimeApproval = (byName as unknown as { approval: { id: string } }).approval.id;

    expect(await removeWithCli('parker')).toMatch(/its 2 parked call\(s\) rejected/);
    for (const id of [parked.approval.id, runtimeApproval]) {
      expect(await store.get(id)).toMatchObject({
        state: 'rejected',
        decidedBy: '(operator)',
        reason: expect.stringMatching(/agent parker was removed from acme/),
      });
      const late = await k.client.decide(id, { decision: 'approve', by: 'alice', operator: true });
      expect(late).toMatchObject({ ok: false, code: 'APPROVAL_CONFLICT' });
    }
    const keyed = await k.client.result('keyed', { workspace: WS, agent: 'parker', memberSince: since, wait: true, timeoutMs: 20_000 });
    expect(keyed).toMatchObject({
      ok: false,
      error: { code: 'APPROVAL_REJECTED', message: expect.stringMatching(/Rejected by \(operator\): agent parker was removed/) },
    });
    const runtime = await k.client.result('by-name', { workspace: WS, agent: 'parker', wait: true, timeoutMs: 20_000 });
    expect(runtime).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });

    // Nothing ran: the agent's database holds neither table.
    const tables = await k.client.call({ ...own, tool: 'DATA_DESCRIBE_SCHEMA', arguments: {} });
    expect(tables).toMatchObject({ ok: true });
    expect(JSON.stringify(tables)).toContain('base');
    expect(JSON.stringify(tables)).not.toMatch(/keyed_t|runtime_t/);
  });

  it('rejects them when run again after a removal cut short between unregistering and its rejections (the command killed)', async () => {
    await k.agentKey(WS, 'cutshort', profile);
    const byName = await k.client.call(
      {
        workspace: WS,
        agent: 'cutshort',
        callId: 'by-name',
        settings: profile.settings,
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE cut_t (v TEXT)' },
      },
      { wait: false },
    );
    const id = (byName as unknown as { approval: { id: string } }).approval.id;
    // What a removal killed after its first step leaves: the agent unregistered, its call parked.
    expect(await agents.remove(WS, 'cutshort')).toBe(true);
    expect(await store.get(id)).toMatchObject({ state: 'pending' });
    expect(await removeWithCli('cutshort')).toMatch(/was not registered.*its 1 parked call\(s\) rejected/);
    expect(await store.get(id)).toMatchObject({ state: 'rejected', decidedBy: '(operator)' });
    expect(await k.client.decide(id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: false, code: 'APPROVAL_CONFLICT' });
    expect(await k.client.result('by-name', { workspace: WS, agent: 'cutshort', wait: true, timeoutMs: 20_000 })).toMatchObject({
      ok: false,
      error: { code: 'APPROVAL_REJECTED' },
    });
  });
});
