import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { OAuthClientMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';

/**
 * Client ID metadata documents (the MCP authorization spec's preferred way for a client to
 * introduce itself, draft-ietf-oauth-client-id-metadata-document): the client id is an https URL,
 * and the document there is the client's registration. agentdb fetches it when a person is
 * asked to consent and when the client asks for tokens (cached for an hour in between).
 */

/** Reads a document: its JSON, or why not. Tests give their own; the default is {@link safeFetch}. */
export type FetchDocument = (url: string) => Promise<unknown>;

/** A client id that is a metadata document's URL: https, with a path, no fragment or credentials. */
export function isDocumentClientId(clientId: string): boolean {
  if (!clientId.startsWith('https://') || clientId.length > 2000) return false;
  try {
    const url = new URL(clientId);
    return url.pathname !== '/' && !url.hash && !url.username && !url.password;
  } catch {
    return false;
  }
}

const MAX_BYTES = 64 * 1024;
const TIMEOUT_MS = 5000;

/** Addresses a server-side fetch must never reach (loopback, private, link-local, metadata services). */
const PRIVATE = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['224.0.0.0', 3],
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['::ffff:0:0', 96],
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv6');

/**
 * GETs a metadata document from the public internet only: the host must resolve to public
 * addresses (else anyone could make agentdb read its own network through a client id), no
 * redirects, at most 64 KB, within 5 s.
 */
export const safeFetch: FetchDocument = async (url) => {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true });
  if (addresses.length === 0 || addresses.some((a) => PRIVATE.check(a.address, a.family === 6 ? 'ipv6' : 'ipv4')))
    throw new Error('its host is not a public address');
  const res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(TIMEOUT_MS), headers: { accept: 'application/json' } });
  if (!res.ok) throw new Error(`it answered HTTP ${res.status}`);
  const text = await res.text();
  if (text.length > MAX_BYTES) throw new Error(`it is larger than ${MAX_BYTES} bytes`);
  return JSON.parse(text) as unknown;
};

/** What a document gives: the client's name and redirect URIs; or why it is not accepted. */
export function readDocument(clientId: string, doc: unknown): { clientName: string; redirectUris: string[] } | { refused: string } {
  const parsed = OAuthClientMetadataSchema.safeParse(doc);
  if (!parsed.success) return { refused: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
  // The document names its own URL: one copied elsewhere cannot speak for the original.
  if ((doc as { client_id?: unknown }).client_id !== clientId) return { refused: 'its client_id is not its own URL' };
  const method = parsed.data.token_endpoint_auth_method ?? 'none';
  if (method !== 'none') return { refused: `token_endpoint_auth_method ${method}: only none (PKCE) is taken from a document` };
  return { clientName: (parsed.data.client_name ?? '').trim().slice(0, 100), redirectUris: parsed.data.redirect_uris.map(String) };
}
