import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort } from '../helpers/own-redis.ts';
import { startCli, stop } from '../helpers/processes.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// A person adds agentdb to an MCP client by its URL alone: the SDK client finds where to sign in
// (401 → protected resource metadata → authorization server metadata), registers itself, sends
// the person's browser to agentdb's consent page, and calls the tools with the token it gets.
/** The client's own redirect listener; the browser's visit to it is intercepted, as a desktop client's listener would take it. */
const CALLBACK = 'http://127.0.0.1:9/callback';

/** What a desktop MCP client keeps between the steps of its sign-in, in memory. */
class MemoryProvider implements OAuthClientProvider {
  info?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = '';
  authorizationUrl?: URL;
  get redirectUrl() {
    return CALLBACK;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'Test Desk', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] };
  }
  state() {
    return 'state-123';
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

let box: Sandbox;
let server: OAuthServer;
let browser: Browser;
let adminKey: string;
let memberKey: string;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  server = await startOAuthServer(box);
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
  memberKey = (await server.members.add('acme', 'bob', 'member')).key;
  browser = await chromium.launch(CHROMIUM);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

/**
 * Signs in through the SDK client and the consent page as the member of `key`; answers the
 * connected client. `scope`: the authorization request's, in place of the SDK's (all of
 * `scopes_supported`); `choose`: the label of the access the person picks instead of the one preselected.
 */
async function signInAs(
  key: string,
  opts: { scope?: string; choose?: string } = {},
): Promise<{ client: Client; provider: MemoryProvider; consentText: string; offered: string[]; choices: { radio: number; gap: number }[] }> {
  const mcpUrl = new URL(`${server.url}/mcp`);
  const provider = new MemoryProvider();
  const first = new Client({ name: 'oauth-e2e', version: '1' });
  // No token yet: the 401 starts discovery, registration and the redirect to the consent page.
  await expect(first.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.info?.client_id).toMatch(/^adbc_/);
  const authUrl = provider.authorizationUrl!;
  expect(authUrl.origin + authUrl.pathname).toBe(`${server.url}/oauth/authorize`);
  expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authUrl.searchParams.get('resource')).toBe(`${server.url}/mcp`);
  // The SDK asks for every scope the resource metadata lists.
  expect(authUrl.searchParams.get('scope')).toBe('read write drop');
  if (opts.scope !== undefined) authUrl.searchParams.set('scope', opts.scope);

  const context = await browser.newContext();
  const page = await context.newPage();
  let callback: URL | undefined;
  await page.route(`${CALLBACK}**`, async (route) => {
    callback = new URL(route.request().url());
    await route.fulfill({ status: 200, contentType: 'text/plain', body: 'You can close this window.' });
  });
  await page.goto(authUrl.toString());
  // Signed out: the sign-in form first, which comes back to the consent page.
  await page.getByLabel('Member key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Allow' }).waitFor();
  const consentText = (await page.locator('main').textContent()) ?? '';
  const offered = await page
    .locator('input[name="access"]')
    .evaluateAll((els) => els.map((e) => `${(e as HTMLInputElement).value}${(e as HTMLInputElement).checked ? '*' : ''}`));
  // Each choice as drawn: the radio's width and the room between it and its own text.
  const choices = await page.locator('input[name="access"]').evaluateAll((els) =>
    els.map((e) => {
      const radio = e.getBoundingClientRect();
      const text = e.parentElement!.querySelector('strong')!.getBoundingClientRect();
      return { radio: radio.width, gap: text.left - radio.right };
    }),
  );
  if (opts.choose) await page.getByLabel(opts.choose).check();
  await page.getByRole('button', { name: 'Allow' }).click();
  await page.waitForURL(`${CALLBACK}**`);
  await context.close();
  expect(callback?.searchParams.get('state')).toBe('state-123');
  expect(callback?.searchParams.get('iss')).toBe(server.url);
  const code = callback!.searchParams.get('code')!;

  const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
  await transport.finishAuth(code);
  expect(provider.saved?.access_token).toMatch(/^adbat_/);
  const client = new Client({ name: 'oauth-e2e', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
  return { client, provider, consentText, offered, choices };
}

it('an SDK client signs in by URL, the person consents in the browser, and the token calls the tools as that member', { timeout: 90_000 }, async () => {
  const admin = await signInAs(adminKey);
  const { client, consentText } = admin;
  expect(consentText).toContain('Connect Test Desk to agentdb?');
  expect(consentText).toContain('ada (admin), in workspace acme');
  expect(consentText).toContain('DATA_DROP_TABLE');
  // All the role allows is offered, and preselected; the token says what was granted.
  expect(admin.offered).toEqual(['read', 'write', 'drop*']);
  // A radio sits right beside its text: the sign-in form's full-width inputs once stretched each
  // radio into a wide column of its own, the text squeezed beside it (seen by a new user, session 26).
  for (const c of admin.choices) {
    expect(c.radio).toBeLessThan(30);
    expect(c.gap).toBeGreaterThanOrEqual(0);
    expect(c.gap).toBeLessThan(16);
  }
  expect(admin.provider.saved?.scope).toBe('read write drop');

  expect(await client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE notes (body TEXT)' } })).toMatchObject({ isError: false });
  expect(await client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO notes VALUES ('hi')" } })).toMatchObject({ isError: false });
  expect(await client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT body FROM notes' } })).toMatchObject({
    isError: false,
    structuredContent: { rows: [['hi']] },
  });
  // The token acts as the member, whose calls no one approves: the drop runs at once, and the
  // consent page said so (it once promised "a drop always waits for a person": seen by a new user, session 28).
  expect(consentText).toContain('no one is asked to approve');
  expect(consentText).not.toContain('waits for a person');
  expect(await client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE scratch (x)' } })).toMatchObject({ isError: false });
  expect(await client.callTool({ name: 'DATA_DROP_TABLE', arguments: { table: 'scratch' } })).toMatchObject({
    isError: false,
    structuredContent: { dropped: 'scratch' },
  });
  // Past the access token's life the SDK client refreshes on the 401 (the refresh token rotates) and goes on.
  const { provider } = admin;
  const before = provider.saved!;
  server.advance((before.expires_in ?? 0) * 1000 + 1000);
  expect(await client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM notes' } })).toMatchObject({ isError: false });
  expect(provider.saved!.refresh_token).not.toBe(before.refresh_token);
  await client.close();

  // A member's grant carries the member's role: a drop is refused, and the consent page said so.
  const bob = await signInAs(memberKey);
  expect(bob.consentText).toContain('bob, in workspace acme');
  expect(bob.consentText).not.toContain('DATA_DROP_TABLE');
  expect(bob.offered).toEqual(['read', 'write*']);
  expect(await bob.client.callTool({ name: 'DATA_DROP_TABLE', arguments: { table: 'notes' } })).toMatchObject({
    isError: true,
    structuredContent: { error: { code: 'NOT_PERMITTED' } },
  });
  expect(await bob.client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM notes' } })).toMatchObject({
    isError: false,
    structuredContent: { rows: [[1]] },
  });

  // Connected apps lists the grant; Disconnect ends it at once.
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in?next=/apps`);
  await page.getByLabel('Member key').fill(memberKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/apps/);
  const row = page.locator('tr[data-grant]');
  expect(await row.count()).toBe(1);
  expect(await row.textContent()).toContain('Test Desk');
  await row.getByRole('button', { name: 'Disconnect' }).click();
  await page.waitForURL(/revoked/);
  expect(await page.locator('tr[data-grant]').count()).toBe(0);
  await context.close();
  await expect(bob.client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } })).rejects.toThrow();
  await bob.client.close();
});

it('the person grants less than their role: a read-only grant lists the tools but its writes are refused with INSUFFICIENT_SCOPE; a scope asked for preselects', {
  timeout: 90_000,
}, async () => {
  // The admin narrows what the app asked for (everything) to read only.
  const narrowed = await signInAs(adminKey, { choose: 'Read only' });
  expect(narrowed.provider.saved?.scope).toBe('read');
  const { tools } = await narrowed.client.listTools();
  expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['DATA_QUERY_SQL', 'DATA_WRITE_SQL', 'DATA_DROP_TABLE']));
  expect(await narrowed.client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE scoped (x)' } })).toMatchObject({
    isError: true,
    structuredContent: { error: { code: 'INSUFFICIENT_SCOPE' } },
  });
  expect(await narrowed.client.callTool({ name: 'DATA_DROP_TABLE', arguments: { table: 'notes' } })).toMatchObject({
    isError: true,
    structuredContent: { error: { code: 'INSUFFICIENT_SCOPE' } },
  });
  expect(await narrowed.client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } })).toMatchObject({ isError: false });
  // A refresh keeps the grant's scope.
  server.advance((narrowed.provider.saved!.expires_in ?? 0) * 1000 + 1000);
  expect(await narrowed.client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE scoped (x)' } })).toMatchObject({
    structuredContent: { error: { code: 'INSUFFICIENT_SCOPE' } },
  });
  expect(narrowed.provider.saved?.scope).toBe('read');
  await narrowed.client.close();

  // An app that asks for read and write only is offered no more, even to an admin.
  const asked = await signInAs(adminKey, { scope: 'read write' });
  expect(asked.offered).toEqual(['read', 'write*']);
  expect(asked.consentText).not.toContain('DATA_DROP_TABLE');
  expect(asked.provider.saved?.scope).toBe('read write');
  expect(await asked.client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE scoped (x)' } })).toMatchObject({ isError: false });
  expect(await asked.client.callTool({ name: 'DATA_DROP_TABLE', arguments: { table: 'scoped' } })).toMatchObject({
    structuredContent: { error: { code: 'INSUFFICIENT_SCOPE' } },
  });
  await asked.client.close();

  // Connected apps shows what each grant may do.
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in?next=/apps`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/apps/);
  const scopes = await page.locator('tr[data-grant] td.grant-scope').allTextContents();
  expect(scopes).toEqual(expect.arrayContaining(['read', 'read write']));
  await context.close();
});

it('agentdb start serves OAuth sign-in, its URLs named by PUBLIC_URL', { timeout: 60_000 }, async () => {
  const sb = sandbox();
  const port = await freePort();
  const app = await startCli(['start'], { ...sb.env, PORT: String(port), PUBLIC_URL: 'https://agentdb.example.com/' });
  try {
    const local = `http://127.0.0.1:${port}`;
    const denied = await fetch(`${local}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toContain('resource_metadata="https://agentdb.example.com/.well-known/oauth-protected-resource/mcp"');
    const prm = (await (await fetch(`${local}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(prm).toMatchObject({ resource: 'https://agentdb.example.com/mcp', authorization_servers: ['https://agentdb.example.com'] });
    const as = (await (await fetch(`${local}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(as).toMatchObject({ issuer: 'https://agentdb.example.com', authorization_endpoint: 'https://agentdb.example.com/oauth/authorize' });
  } finally {
    await stop(app);
    await sb.cleanup();
  }
});
