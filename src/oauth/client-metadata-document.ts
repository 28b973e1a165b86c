import { lookup } from 'node:dns';
import { request } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
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

/** Past this many bytes the read stops: a client's registration is a few hundred. */
export const MAX_DOCUMENT_BYTES = 64 * 1024;
const TIMEOUT_MS = 5000;

/**
 * IPv6 is allowed only in global unicast (2000::/3), so NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
 * IPv4-mapped and -compatible, unique-local, link-local and multicast are out by not being in it;
 * within it, the ranges that carry or stand for other addresses (Teredo and the rest of
 * 2001::/23, 6to4 2002::/16) or are documentation are refused as well.
 */
const GLOBAL_V6 = blockList('ipv6', [['2000::', 3]]);
/** Addresses a server-side fetch must never reach: every special-purpose range of the IANA registries. */
const SPECIAL_V4 = blockList('ipv4', [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.31.196.0', 24],
  ['192.52.193.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['192.175.48.0', 24],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 3],
]);
const SPECIAL_V6 = blockList('ipv6', [
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
]);

/** A block list of the subnets `ranges` (network, prefix length), built as a value (nothing runs on import). */
function blockList(family: 'ipv4' | 'ipv6', ranges: readonly (readonly [string, number])[]): BlockList {
  const list = new BlockList();
  for (const [net, bits] of ranges) list.addSubnet(net, bits, family);
  return list;
}

/** True when a server-side fetch may connect to `address` (an IP literal). */
export function publicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !SPECIAL_V4.check(address, 'ipv4');
  if (family === 6) return GLOBAL_V6.check(address, 'ipv6') && !SPECIAL_V6.check(address, 'ipv6');
  return false;
}

/** How {@link documentFetcher} resolves names and judges addresses: DNS and {@link publicAddress}, unless a test says. */
export interface FetcherOptions {
  resolve?: typeof lookup;
  isPublic?: (address: string) => boolean;
  /** Certificates to trust besides the system's (a test's own server). */
  ca?: string;
}

/**
 * A lookup like dns.lookup that answers only when every address is public, and then the first:
 * the connection goes to the very address that was checked, so a name that resolves differently
 * the second time (DNS rebinding) has no second time.
 */
function vettedLookup(resolve: typeof lookup, isPublic: (address: string) => boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { family: options.family ?? 0, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as unknown as { address: string; family: number }[];
      if (list.length === 0 || !list.every((a) => isPublic(a.address)))
        return callback(Object.assign(new Error('its host is not a public address'), { code: 'ENOTPUBLIC' }), '', 0);
      const first = list[0]!;
      if (options.all) return (callback as unknown as (e: null, a: (typeof list)[number][]) => void)(null, [first]);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * GETs a metadata document from the public internet only: the host must resolve to public
 * addresses (else anyone could make agentdb read its own network through a client id) and the
 * connection is made to the address checked (a new one each time: no pooled socket skips the
 * check); no redirects; the body is read as it streams and dropped past
 * {@link MAX_DOCUMENT_BYTES}; all within 5 s.
 */
export function documentFetcher(opts: FetcherOptions = {}): FetchDocument {
  const isPublic = opts.isPublic ?? publicAddress;
  const connectTo = vettedLookup(opts.resolve ?? lookup, isPublic);
  return (url) =>
    new Promise((resolve, reject) => {
      const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
      if (isIP(host) && !isPublic(host)) return reject(new Error('its host is not a public address'));
      const req = request(
        url,
        { method: 'GET', lookup: connectTo, agent: false, headers: { accept: 'application/json' }, timeout: TIMEOUT_MS, ...(opts.ca ? { ca: opts.ca } : {}) },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            return reject(new Error(`it answered HTTP ${res.statusCode}`));
          }
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_DOCUMENT_BYTES) req.destroy(new Error(`it is larger than ${MAX_DOCUMENT_BYTES} bytes`));
            else chunks.push(chunk);
          });
          res.on('end', () => {
            try {
              resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown);
            } catch {
              reject(new Error('it is not JSON'));
            }
          });
          res.on('error', reject);
        },
      );
      // The whole read, not just each idle stretch, is bounded.
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
      req.on('close', () => clearTimeout(timer));
      req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end();
    });
}

/** {@link documentFetcher} over DNS and the public internet: what agentdb reads documents with. */
export const safeFetch: FetchDocument = documentFetcher();

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
