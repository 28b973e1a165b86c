import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// Session 38, N16: a person who approved a call in the inbox saw its decided row with the "ran"
// cell empty (the call runs after the decision), and the open page never filled it in: its live
// stream carried approvals requested and decided, not the run that followed. Now the approved
// call's completion reaches the inbox's stream as `approval.ran`, and the page refreshes.

let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
const gated = { database: 'agent' as const, approval: 'write' as const };

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
}, 60_000);

afterAll(async () => {
  await client?.close();
  await web?.close();
  await box?.cleanup();
});

/** Parks one write of acme/scout and answers its call and approval ids. */
async function park(sql: string): Promise<{ callId: string; approval: string }> {
  const answer = (await client.call(
    { workspace: 'acme', agent: 'scout', settings: gated, tool: 'DATA_WRITE_SQL', arguments: { sql } },
    { wait: false },
  )) as AwaitingAnswer;
  expect(answer).toMatchObject({ status: 'awaiting_approval' });
  return { callId: answer.callId, approval: answer.approval.id };
}

/** The inbox's live stream as a browser opens it, read event by event (`type` and approval `id`). */
async function openStream(cookie: string) {
  const r = await fetch(`${web.url}/inbox/events`, { headers: { cookie } });
  expect(r.status).toBe(200);
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const next = async (): Promise<{ event: string; data: string }> => {
    for (;;) {
      const end = text.indexOf('\n\n');
      if (end >= 0) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        if (event) return { event, data: /^data: (.*)$/m.exec(block)?.[1] ?? '' };
        continue;
      }
      const chunk = await reader.read();
      if (chunk.done) throw new Error('the stream ended');
      text += decoder.decode(chunk.value);
    }
  };
  return { next, close: () => reader.cancel() };
}

describe("the inbox hears an approved call's run", { timeout: 60_000 }, () => {
  it('sends approval.ran once the approved call ran, so the decided row shows how it ended without a reload', async () => {
    await client.call({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'agent' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE t (v INTEGER)' },
    });
    const cookie = await keyCookie(web, (await web.members.add('acme', 'ada', 'admin')).key, '/inbox');
    const stream = await openStream(cookie);
    expect((await stream.next()).event).toBe('ready');
    const approved = await park('INSERT INTO t (v) VALUES (1)');
    const page = await (await fetch(`${web.url}/inbox`, { headers: { cookie } })).text();
    const csrf = /<meta name="csrf-token" content="([^"]+)">/.exec(page)![1]!;
    const decided = await fetch(`${web.url}/approvals/${approved.approval}/decision`, {
      method: 'POST',
      headers: { cookie, origin: web.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, decision: 'approve', reason: 'checked' }).toString(),
      redirect: 'manual',
    });
    expect(decided.headers.get('location')).toBe('/inbox?decided=approved');
    expect(await client.result(approved.callId, { workspace: 'acme', agent: 'scout', wait: true })).toMatchObject({ ok: true });
    // A call parked after the run is on the stream after its completion: what came before it is all there is.
    const later = await park('INSERT INTO t (v) VALUES (2)');
    const seen: { type: string; id: string }[] = [];
    for (;;) {
      const { event, data } = await stream.next();
      if (event !== 'approval') continue;
      const e = JSON.parse(data) as { type: string; id: string };
      if (e.id === later.approval) break;
      seen.push(e);
    }
    await stream.close();
    expect(seen).toEqual([
      { type: 'approval.requested', id: approved.approval },
      { type: 'approval.decided', id: approved.approval },
      { type: 'approval.ran', id: approved.approval },
    ]);
    // What the refresh that event sets off shows: the decided row with how the call ended.
    const after = await (await fetch(`${web.url}/inbox`, { headers: { cookie } })).text();
    expect(after).toMatch(/<td class="opt">ok<\/td>/);
  });
});
