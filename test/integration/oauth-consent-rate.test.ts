import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { BASE, HOST, oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Hostile review T14 (session 35): the consent page's Allow makes a grant and its code, and ends
// the member's oldest grant past 50 (about 16 Redis commands), and was charged nothing: one
// signed-in member posted it 222 times a second from one process, outside every rate. It now
// counts a call against the member's and the workspace's rates, as a restore or a grid page does.

let box: Sandbox;
let server: OAuthServer;
const { register, signIn, pkce, authParams, authorizePage } = oauthFlow(() => server);

beforeAll(async () => {
  // Four calls a window for the workspace: the consent page (a tenth) and three consents.
  box = sandbox({ RATE_LIMITS: 'plan', RATE_LIMIT_WINDOW_S: '600', RATE_LIMIT_WORKSPACE_CALLS: '4' });
  await box.pool();
  server = await startOAuthServer(box);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

it("a consent counts a call of the member's rates: past them 429 with Retry-After, and no grant is made", async () => {
  const key = (await server.members.add('acme', 'ada', 'member')).key;
  const id = await register();
  const { cookie } = await signIn(key);
  const params = authParams(id, pkce().challenge);
  const page = await authorizePage(cookie!, params);
  expect(page.statusCode).toBe(200);
  const csrf = /name="csrf-token" content="([^"]+)"/.exec(page.body)![1]!;
  const allow = () =>
    server.app.inject({
      method: 'POST',
      url: '/oauth/authorize',
      headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded', origin: BASE, cookie: cookie! },
      payload: new URLSearchParams({ ...params, decision: 'allow', _csrf: csrf, access: 'write' }).toString(),
    });
  for (let i = 0; i < 3; i++) expect((await allow()).statusCode).toBe(303);
  const grants = () => server.redis.zcard(`${box.config.prefix}:{oauth}:grants:acme/ada`);
  expect(await grants()).toBe(3);
  const refused = await allow();
  // main: 303, a fourth grant made.
  expect(refused.statusCode).toBe(429);
  expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  expect(refused.body).toContain('RATE_LIMITED');
  expect(await grants()).toBe(3);
});

it('a consent refused for the rate shows the person a way back to the consent page, not the data pages', async () => {
  // Its own workspace, whose three calls this window go to three consents first.
  const key = (await server.members.add('beta', 'bo', 'member')).key;
  const id = await register();
  const { cookie } = await signIn(key);
  const params = authParams(id, pkce().challenge);
  const page = await authorizePage(cookie!, params);
  const csrf = /name="csrf-token" content="([^"]+)"/.exec(page.body)![1]!;
  const allow = () =>
    server.app.inject({
      method: 'POST',
      url: '/oauth/authorize',
      // As a browser posts the form: it asks for HTML.
      headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded', origin: BASE, cookie: cookie!, accept: 'text/html' },
      payload: new URLSearchParams({ ...params, decision: 'allow', _csrf: csrf, access: 'write' }).toString(),
    });
  for (let i = 0; i < 3; i++) expect((await allow()).statusCode).toBe(303);
  const refused = await allow();
  expect(refused.statusCode).toBe(429);
  expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  expect(refused.body).toContain('nothing was granted');
  // main: the data pages' error page, whose one way on was "← all databases".
  expect(refused.body).not.toContain('all databases');
  const back = /<a href="([^"]*)">Back to the consent page<\/a>/.exec(refused.body)?.[1]?.replaceAll('&amp;', '&');
  expect(back).toBeDefined();
  expect(back!.startsWith('/oauth/authorize?')).toBe(true);
  // Followed within the same window, the page itself is refused (it counts a lookup), with the same way back.
  const again = await server.app.inject({ method: 'GET', url: back!, headers: { host: HOST, cookie: cookie!, accept: 'text/html' } });
  expect(again.statusCode).toBe(429);
  expect(again.body).toContain('Back to the consent page');
});

// Session 36, T16: the page's GET (it reads the app's record, and may fetch and keep a client
// metadata document) was charged nothing, so a signed-in member could load it in a loop outside
// every rate. It now counts a lookup (a tenth of a call), refused past the rates before anything is read.
it("the consent page counts a lookup of the member's rates: past them 429 with Retry-After", async () => {
  const key = (await server.members.add('gamma', 'gil', 'member')).key;
  const id = await register();
  const { cookie } = await signIn(key);
  const params = authParams(id, pkce().challenge);
  const statuses: number[] = [];
  // Four calls a window: 40 pages, the 41st refused.
  for (let i = 0; i < 41; i++) statuses.push((await authorizePage(cookie!, params)).statusCode);
  // main: 41 pages shown.
  expect(statuses.filter((s) => s === 200)).toHaveLength(40);
  expect(statuses.at(-1)).toBe(429);
  const refused = await authorizePage(cookie!, params);
  expect(refused.statusCode).toBe(429);
  expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  expect(refused.body).toContain('showing the consent page counts a tenth of a call');
});
