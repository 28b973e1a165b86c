import { TooManyRequestsError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { type GrantLevel, levelOfScope } from '../contracts/grant-scope.ts';
import { servesTools } from './mcp-resource.ts';
import type { OAuthClient, OAuthClients } from './oauth-clients.ts';

/** The query of an authorization request (OAuth 2.1 §4.1.1, RFC 8707's `resource`), as text. */
export interface AuthorizationQuery {
  response_type?: string;
  client_id?: string;
  redirect_uri?: string;
  code_challenge?: string;
  code_challenge_method?: string;
  state?: string;
  scope?: string;
  resource?: string;
}

/** A request the person may be asked about: the client, and where its answer goes. */
export interface AuthorizationRequest {
  client: OAuthClient;
  redirectUri: string;
  /** The request named its redirect URI (else the client's only one): the token request must name it too (OAuth 2.1 §4.1.3). */
  redirectUriGiven: boolean;
  challenge: string;
  resource: string;
  /** The level the request's `scope` asks for (its highest scope agentdb knows); absent: it names none, so the role's. */
  asked?: GrantLevel;
  state?: string;
}

/**
 * What an authorization request comes to. `show` errors go to the person only: with no known
 * client or registered redirect URI, redirecting would send the browser wherever the link said
 * (OAuth 2.1 §4.1.2.1). `redirect` errors go back to the client's registered redirect URI:
 * `atOnce` only when the client is {@link vouchedRedirect}; else the person is shown the error
 * and a link back, since anyone may register any https URI and an error sent there at once would
 * make agentdb an open redirector (RFC 9700 §4.11.2).
 */
export type AuthorizationCheck =
  | { ok: true; request: AuthorizationRequest }
  | { ok: false; show: string }
  | { ok: false; redirect: { redirectUri: string; error: string; description: string; state?: string; atOnce: boolean } };

/**
 * True when someone other than the client's own registration vouches for where it redirects:
 * a client id metadata document whose redirect URI is on the document's own host (whoever runs
 * that host chose both). A registered (DCR) client's redirect URIs are whatever it said.
 */
export function vouchedRedirect(client: OAuthClient, redirectUri: string): boolean {
  if (!client.documentHost) return false;
  try {
    const url = new URL(redirectUri);
    return url.protocol === 'https:' && url.host === client.documentHost;
  } catch {
    return false;
  }
}

/**
 * True when `given` is one of the client's redirect URIs: exactly, or, for an http loopback URI,
 * on any port (RFC 8252 §7.3: a desktop app listens on whatever port it gets).
 */
export function redirectRegistered(registered: readonly string[], given: string): boolean {
  // Registration refuses fragments and credentials; a URI given here has them neither (an empty
  // `#` parses to no hash, hence the text).
  if (given.includes('#')) return false;
  if (registered.includes(given)) return true;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return false;
  }
  if (url.username || url.password) return false;
  if (url.protocol !== 'http:' || !LOOPBACK.includes(url.hostname)) return false;
  return registered.some((r) => {
    const reg = new URL(r);
    return reg.protocol === 'http:' && reg.hostname === url.hostname && reg.pathname === url.pathname && reg.search === url.search;
  });
}

const LOOPBACK = ['127.0.0.1', '[::1]', 'localhost'];

/** A PKCE challenge: base64url of a sha256, 43 characters. */
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/**
 * Checks an authorization request before anyone is asked: the client is registered, the
 * redirect URI is one of its own (exactly), the response type is `code`, PKCE is S256 (plain is
 * refused), and the resource is one of this server's MCP endpoints that serves tools to a member
 * of `to.workspace` (`servesTools`, below `to.base`: PUBLIC_URL or the request's origin),
 * `<base>/mcp` when the client names none.
 */
export async function checkAuthorization(
  clients: OAuthClients,
  q: AuthorizationQuery,
  to: { base: string; workspace: string },
  source: string,
): Promise<AuthorizationCheck> {
  let client: OAuthClient | undefined;
  try {
    client = q.client_id ? await clients.get(q.client_id, source) : undefined;
  } catch (err) {
    if (err instanceof TooManyRequestsError) return { ok: false, show: `too_many_requests: ${err.message}` };
    throw err;
  }
  if (!client) return { ok: false, show: 'invalid_client: this app is not registered here (or its registration lapsed); connect it again.' };
  const redirectUri = q.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri || !redirectRegistered(client.redirectUris, redirectUri)) {
    return { ok: false, show: 'invalid_request: redirect_uri is not one the app registered, so agentdb will not send you there.' };
  }
  const back = (error: string, description: string) =>
    ({
      ok: false,
      redirect: { redirectUri, error, description, ...(q.state !== undefined ? { state: q.state } : {}), atOnce: vouchedRedirect(client, redirectUri) },
    }) as const;
  if (q.response_type !== 'code') return back('unsupported_response_type', 'response_type must be code.');
  if (q.code_challenge_method !== 'S256') return back('invalid_request', 'PKCE is required with code_challenge_method=S256 (plain is refused).');
  if (!q.code_challenge || !CHALLENGE.test(q.code_challenge))
    return back('invalid_request', 'code_challenge must be an S256 challenge (43 base64url characters).');
  const resource = q.resource ?? `${to.base}/mcp`;
  if (!servesTools(resource, to.workspace, to.base))
    return back(
      'invalid_target',
      "resource is not one of this agentdb's MCP endpoints with tools open to you: /mcp or /mcp/w/<your workspace> (a team endpoint lists no tools).",
    );
  const asked = levelOfScope(q.scope);
  return {
    ok: true,
    request: {
      client,
      redirectUri,
      redirectUriGiven: q.redirect_uri !== undefined,
      challenge: q.code_challenge,
      resource,
      ...(asked ? { asked } : {}),
      ...(q.state !== undefined ? { state: q.state } : {}),
    },
  };
}

/** The redirect URI with the authorization response's parameters (and RFC 9207's `iss`). */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}
