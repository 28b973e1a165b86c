import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { OAuthServer } from './oauth-server.ts';

/** The host the OAuth tests' requests name: the issuer and resources are `http://agentdb.test/…`. */
export const HOST = 'agentdb.test';
export const BASE = `http://${HOST}`;
/** A desktop client's loopback redirect URI (never reached: the tests read the redirect). */
export const CALLBACK = 'http://127.0.0.1:7777/cb';

/** The "Tell the app" link of a refused authorization request's page: where the person may take the error. */
export function linkBack(body: string): URL {
  const href = /<a href="([^"]+)" rel="noreferrer">Tell the app/.exec(body)?.[1];
  expect(href).toBeDefined();
  return new URL(href!.replaceAll('&amp;', '&').replaceAll('&#39;', "'").replaceAll('&quot;', '"'));
}

/**
 * The steps of an OAuth sign-in as requests injected into `server()`: register, sign in on the
 * web page, consent, exchange, call `/mcp`.
 */
export function oauthFlow(server: () => OAuthServer) {
  const form = (body: Record<string, string>) => new URLSearchParams(body).toString();
  const formHeaders = { host: HOST, 'content-type': 'application/x-www-form-urlencoded' };

  async function register(redirectUris: string[] = [CALLBACK]): Promise<string> {
    const res = await server().app.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { host: HOST },
      payload: { client_name: 'Refusal Desk', redirect_uris: redirectUris, token_endpoint_auth_method: 'none' },
    });
    expect(res.statusCode).toBe(201);
    return res.json<{ client_id: string }>().client_id;
  }

  /** A web session's cookie, signed in with `key`; undefined when sign-in refused it. */
  async function signIn(key: string): Promise<{ cookie?: string; status: number }> {
    const res = await server().app.inject({
      method: 'POST',
      url: '/sign-in',
      headers: { ...formHeaders, origin: BASE },
      payload: form({ key, next: '/inbox' }),
    });
    const set = res.headers['set-cookie'];
    const cookie = (Array.isArray(set) ? set[0] : set)?.split(';')[0];
    return { status: res.statusCode, ...(cookie ? { cookie } : {}) };
  }

  function pkce() {
    const verifier = randomBytes(32).toString('base64url');
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  }

  /** GET /oauth/authorize as the session of `cookie`. */
  function authorizePage(cookie: string | undefined, params: Record<string, string>) {
    return server().app.inject({
      method: 'GET',
      url: `/oauth/authorize?${new URLSearchParams(params)}`,
      headers: { host: HOST, accept: 'text/html', ...(cookie ? { cookie } : {}) },
    });
  }

  /** The consent page, then Allow (or Deny): answers where the browser is sent. */
  async function consent(cookie: string, params: Record<string, string>, decision = 'allow'): Promise<URL> {
    const page = await authorizePage(cookie, params);
    expect(page.statusCode).toBe(200);
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(page.body)![1]!;
    // What the page preselects goes with the form, as from a browser.
    const access = /name="access" value="([a-z]+)" checked/.exec(page.body)?.[1];
    const res = await server().app.inject({
      method: 'POST',
      url: '/oauth/authorize',
      headers: { ...formHeaders, origin: BASE, cookie },
      payload: form({ ...params, decision, _csrf: csrf, ...(access ? { access } : {}) }),
    });
    expect(res.statusCode).toBe(303);
    return new URL(res.headers.location as string);
  }

  function authParams(clientId: string, challenge: string, extra: Record<string, string> = {}) {
    return {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: CALLBACK,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 's1',
      resource: `${BASE}/mcp`,
      ...extra,
    };
  }

  function token(body: Record<string, string>) {
    return server().app.inject({ method: 'POST', url: '/oauth/token', headers: formHeaders, payload: form(body) });
  }

  /** An MCP initialize with `bearer` at `path`: 200 when the endpoint took it. */
  function mcp(bearer: string | undefined, path = '/mcp') {
    return server().app.inject({
      method: 'POST',
      url: path,
      headers: {
        host: HOST,
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
      },
      payload: {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      },
    });
  }

  /** A whole sign-in as the member of `key`: the client, its verifier, and the token response. */
  async function signedIn(key: string, extra: Record<string, string> = {}) {
    const clientId = await register();
    const { cookie } = await signIn(key);
    const { verifier, challenge } = pkce();
    const back = await consent(cookie!, authParams(clientId, challenge, extra));
    const code = back.searchParams.get('code')!;
    const res = await token({
      grant_type: 'authorization_code',
      client_id: clientId,
      code,
      code_verifier: verifier,
      redirect_uri: CALLBACK,
      resource: extra.resource ?? `${BASE}/mcp`,
    });
    expect(res.statusCode).toBe(200);
    return { clientId, cookie: cookie!, tokens: res.json<{ access_token: string; refresh_token: string; expires_in: number }>() };
  }

  return { form, formHeaders, register, signIn, pkce, authorizePage, consent, authParams, token, mcp, signedIn };
}
