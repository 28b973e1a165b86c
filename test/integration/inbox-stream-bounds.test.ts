import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// The inbox's live streams hold a connection each for as long as a page is open, and behind a
// proxy only the process's total of connections bounds them: one member opening streams from a
// script could hold every connection the process has. Streams open at once are bounded per
// member, per workspace and in all (here 2 and 3); past one the answer is RATE_LIMITED, 429 with
// Retry-After, and a stream closed gives its place back.

let box: Sandbox;
let web: WebServer;
const cookies: Record<string, string> = {};
const open: http.IncomingMessage[] = [];

/** One stream's answer; a 200 is read up to its `ready` event, so it is subscribed. */
function stream(who: string): Promise<{ res: http.IncomingMessage; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${web.url}/inbox/events`, { headers: { cookie: cookies[who]!, accept: 'text/event-stream' } }, (res) => {
      open.push(res);
      res.setEncoding('utf8');
      let body = '';
      res.on('data', (chunk: string) => {
        body += chunk;
        if (res.statusCode !== 200 || body.includes('event: ready')) resolve({ res, body });
      });
      res.on('end', () => resolve({ res, body }));
    });
    req.on('error', reject);
  });
}

async function signIn(name: string): Promise<void> {
  cookies[name] = await signedInCookie(web, 'acme', name, 'member', '/inbox');
}

beforeAll(async () => {
  box = sandbox();
  web = await startWebServer(box, { inboxStreamBounds: { perCaller: 2, perWorkspace: 3, total: 100 } });
  await signIn('ada');
  await signIn('bob');
}, 60_000);

afterAll(async () => {
  for (const res of open) res.destroy();
  await web?.close();
  await box?.cleanup();
});

describe('live inbox streams at once', () => {
  it('refuses one past the member’s and the workspace’s bound, and takes a new one once one closes', async () => {
    const first = await stream('ada');
    const second = await stream('ada');
    expect([first.res.statusCode, second.res.statusCode]).toEqual([200, 200]);

    const mine = await stream('ada');
    expect(mine.res.statusCode).toBe(429);
    expect(mine.res.headers['retry-after']).toBe('30');
    expect(mine.body).toContain('RATE_LIMITED');
    expect(mine.body).toContain('You have 2 live inbox pages open');

    // Another member has room of their own, up to the workspace's bound.
    expect((await stream('bob')).res.statusCode).toBe(200);
    const ours = await stream('bob');
    expect(ours.res.statusCode).toBe(429);
    expect(ours.body).toContain('Your workspace has 3 live inbox pages open');

    // A page closed gives its place back.
    first.res.destroy();
    const again = await vi.waitFor(
      async () => {
        const s = await stream('ada');
        if (s.res.statusCode !== 200) {
          s.res.destroy();
          throw new Error(`still refused: ${s.res.statusCode}`);
        }
        return s;
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(again.body).toContain('event: ready');
  }, 60_000);
});
