import type { FastifyRequest } from 'fastify';

/** Which Hosts and browser Origins `/mcp` answers (config MCP_ALLOWED_HOSTS, MCP_ALLOWED_ORIGINS, HOST). */
export interface McpOriginPolicy {
  /** Host names (no port) besides loopback, or `*` for any. */
  hosts: readonly string[] | '*';
  /** Origins besides the request's own and loopback ones. */
  origins: readonly string[];
}

/** Loopback as `URL.hostname` spells it. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Why a request to `/mcp` must be refused with 403 against DNS rebinding and cross-site use (MCP
 * 2025-06-18 and later, transports: "Servers MUST validate the Origin header"), or undefined
 * when it may go on. The Host, or X-Forwarded-Host from a proxy TRUST_PROXY believes
 * (`request.host`), must name loopback or one of `policy.hosts`, port aside; an Origin,
 * when a browser sent one, must be the request's own, a loopback one or one of
 * `policy.origins`. `Origin: null` (a sandboxed frame, a file) is refused: it names no site.
 *
 * The MCP SDK has the same check, but inside `StreamableHTTPServerTransport` (which `/mcp` does
 * not use, see mcp-exchange.ts) and as Express middleware (`hostHeaderValidation`); this is
 * its rule on Fastify's request, with its answer (403, JSON-RPC -32000), ports ignored as the
 * middleware ignores them.
 */
export function mcpOriginRefusal(request: FastifyRequest, policy: McpOriginPolicy): string | undefined {
  const host = request.host;
  const hostname = hostnameOf(host);
  if (policy.hosts !== '*') {
    if (hostname === undefined) return `Invalid Host header: ${host || '(none)'}`;
    if (!LOOPBACK.has(hostname) && !policy.hosts.includes(hostname)) return `Invalid Host: ${hostname}`;
  }
  const origin = request.headers.origin;
  if (origin === undefined) return undefined;
  const url = URL.canParse(origin) ? new URL(origin) : undefined;
  if (!url || url.origin === 'null') return `Invalid Origin header: ${origin}`;
  if (url.host === host || LOOPBACK.has(url.hostname) || policy.origins.includes(url.origin)) return undefined;
  return `Invalid Origin header: ${origin}`;
}

/** The host name of a Host header (lower case, IPv6 in brackets), or undefined when it is none. */
function hostnameOf(host: string | undefined): string | undefined {
  // A client names the same Host on every request: the last answer is kept, so a call parses
  // no URL (two parses, a few microseconds, on every /mcp request).
  if (host !== lastHost.host) lastHost = { host, hostname: parsedHostname(host) };
  return lastHost.hostname;
}
let lastHost: { host: string | undefined; hostname: string | undefined } = { host: undefined, hostname: undefined };

function parsedHostname(host: string | undefined): string | undefined {
  const url = host ? URL.parse(`http://${host}`) : null;
  // Anything besides host[:port] (a path, credentials) is not a Host header.
  if (!url || url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined;
  return url.hostname;
}

/**
 * The policy of a service listening on `host` (config HOST) and reached at `publicUrl`
 * (PUBLIC_URL, when the configuration has one): an address of its own, not a wildcard, and the
 * public URL's host are names clients reach it by, so they are allowed with MCP_ALLOWED_HOSTS,
 * and the public URL's origin with MCP_ALLOWED_ORIGINS.
 */
export function mcpOriginPolicy(config: {
  host: string;
  mcpAllowedHosts: readonly string[] | '*';
  mcpAllowedOrigins: readonly string[];
  publicUrl?: string;
}): McpOriginPolicy {
  const publicUrl = config.publicUrl && URL.canParse(config.publicUrl) ? new URL(config.publicUrl) : undefined;
  const origins = publicUrl ? [...config.mcpAllowedOrigins, publicUrl.origin] : config.mcpAllowedOrigins;
  if (config.mcpAllowedHosts === '*') return { hosts: '*', origins };
  const listen = config.host.includes(':') && !config.host.startsWith('[') ? `[${config.host}]` : config.host;
  const own = [WILDCARDS.has(config.host) ? undefined : hostnameOf(listen), publicUrl?.hostname].filter((h): h is string => h !== undefined);
  return { hosts: [...config.mcpAllowedHosts, ...own], origins };
}

/** HOST values that listen on every address, and so name none. */
const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);
