import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer, keyCookie } from '../helpers/web-server.ts';

// A member revoked while their inbox is open must lose the live stream even when no approval
// event comes to carry the news: the stream's heartbeat checks the member again.

let box: Sandbox;
let web: WebServer;

beforeAll(async () => {
  box = sandbox();
  web = await startWebServer(box, { heartbeatMs: 100 });
});
afterAll(async () => {
  await web.close();
  await box.cleanup();
});

const signIn = (key: string): Promise<string> => keyCookie(web, key, '/inbox');

describe('/inbox/events', () => {
  it('ends with signed-out when the member is revoked, without waiting for an event', async () => {
    const { key } = await web.members.add('acme', 'ada', 'member');
    const cookie = await signIn(key);
    const r = await fetch(`${web.url}/inbox/events`, { headers: { cookie } });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('event: ready')) text += decoder.decode((await reader.read()).value);
    expect(await web.members.revoke('acme', 'ada')).toBe(true);
    // The stream ends by itself (the read reports done), having said why.
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value);
    }
    expect(text).toContain('event: signed-out');
  });
});
