// What the HTTP server answers with: waits and connection bounds, CSV exports, MCP's origins,
// hosts and approval wait, web sessions, OAuth, the public URL, the key cache, the proxy. A part
// of the one schema (see src/config.ts): each variable's entry, its Config field and their
// mapping, together.

import { z } from 'zod';
import { int, commaList } from './env-checks.ts';

const httpSchema = z.object({
  /** How long one HTTP request (`POST /v1/calls`, `GET …?wait=true`) waits before answering where the call stands. */
  HTTP_WAIT_MS: int(100, 600_000, 30_000),
  /**
   * How long a request may take to arrive whole, headers and body, before 408 and a closed
   * connection (see src/http/connection-limits.ts); a long poll or SSE stream once received is not cut.
   */
  HTTP_REQUEST_TIMEOUT_MS: int(1_000, 600_000, 30_000),
  /**
   * Connections one address (an IPv6 address's /64) may hold open at once (unset behind TRUST_PROXY, where every
   * connection is the proxy's). A large office behind one NAT, reached without a proxy, may need more.
   */
  HTTP_CONNECTIONS_PER_ADDRESS: int(1, 1_000_000, 256),
  /** Connections the HTTP server holds at once, whoever opens them: well under the process's file descriptors. */
  HTTP_MAX_CONNECTIONS: int(1, 1_000_000, 8_192),
  /**
   * Web-page CSV exports under way at once per member, per workspace, and in the process: each
   * holds up to three chunks of up to 2 MiB in the HTTP process while it downloads (see
   * src/shards/export-slots.ts). Past one, the export is refused with RATE_LIMITED (429).
   */
  EXPORTS_PER_MEMBER: int(1, 10_000, 4),
  EXPORTS_PER_WORKSPACE: int(1, 10_000, 8),
  EXPORTS_MAX: int(1, 100_000, 64),
  /**
   * The most one CSV export sends, in bytes; past it the download is aborted (RESOURCE_LIMIT in the
   * log, never a file that looks complete). A table's export is bounded by its database's size; a
   * view's is not: an endless recursive view streamed 386 MB in 73 s and went on (session 33, R7).
   * 2 GiB is about twice the CSV of the largest plan's database (1 GiB, enterprise).
   */
  EXPORT_MAX_BYTES: int(1024 * 1024, 2 ** 50, 2 * 1024 ** 3),
  /**
   * Seconds a download (a CSV export, an offloaded result) may go without its reader taking
   * anything before it is cut off (never made to look complete), giving its slot back: without
   * it, 64 workspaces each holding one export that reads nothing held every slot (session 36,
   * T16; src/policy/stall-deadline.ts).
   */
  DOWNLOAD_STALL_SECONDS: int(1, 86_400, 60),
  /**
   * How long an MCP tool call (one that asked for no task) waits for a person's decision before
   * answering that it is pending. Below 60 s, the MCP SDK clients' default request timeout: at
   * 60 s the SDK client, LangChain and OpenAI Agents gave up with -32001 first and never learned
   * the approval id (issue 28). 25 s leaves room for a slow network and a client set shorter.
   */
  MCP_APPROVAL_WAIT_MS: int(100, 59_999, 25_000),
  /**
   * Browser origins `/mcp` serves besides its own and loopback ones (comma-separated, e.g.
   * `https://app.example.com`); any other Origin header, `null` included, is refused with 403.
   * Requests without an Origin (every non-browser client) are not affected.
   */
  MCP_ALLOWED_ORIGINS: z
    .string()
    .default('')
    .transform((v, ctx): string[] => {
      const list = commaList(v);
      for (const o of list) {
        const parsed = URL.canParse(o) ? new URL(o) : undefined;
        if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.origin !== o.replace(/\/$/, '')) {
          ctx.addIssue({ code: 'custom', message: `not an origin (scheme://host[:port], nothing after): ${JSON.stringify(o)}` });
          return z.NEVER;
        }
      }
      return list.map((o) => new URL(o).origin);
    }),
  /**
   * Host names `/mcp` answers to besides loopback and HOST (comma-separated, no ports: the name
   * your clients use, e.g. `agentdb.example.com`), against DNS rebinding; `*`: any host (only
   * when a proxy in front checks the Host itself).
   */
  MCP_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((v, ctx): string[] | '*' => {
      if (v.trim() === '*') return '*';
      const list = commaList(v).map((h) => h.toLowerCase());
      for (const h of list) {
        if (!URL.canParse(`http://${h}`) || new URL(`http://${h}`).host !== h || h.includes(':') !== h.startsWith('[')) {
          ctx.addIssue({ code: 'custom', message: `not a host name without a port: ${JSON.stringify(h)}` });
          return z.NEVER;
        }
      }
      return list;
    }),
  /** How long a web page session lives without a request (sliding); the cookie itself ends with the browser. */
  WEB_SESSION_TTL_S: int(60, 30 * 24 * 3600, 8 * 3600),
  /** OAuth sign-in for people's MCP clients (docs/mcp-http.md "Sign in with OAuth"); `off` leaves keys only. */
  OAUTH: z.enum(['on', 'off']).default('on'),
  /** How long an OAuth access token works; a client refreshes it with its refresh token. */
  OAUTH_ACCESS_TOKEN_TTL_S: int(60, 24 * 3600, 3600),
  /** How long an OAuth grant lasts unused: each refresh rotates the refresh token and starts this again. */
  OAUTH_REFRESH_TOKEN_TTL_S: int(3600, 365 * 24 * 3600, 30 * 24 * 3600),
  /**
   * The most registered OAuth clients nobody has signed in through yet that the whole service
   * keeps (each lapses a day after registering); past it, registration answers 429 until one lapses.
   */
  OAUTH_UNCONSENTED_CLIENTS_MAX: int(1, 10_000_000, 10_000),
  /**
   * Requests to /oauth/token and /oauth/revoke one address (an IPv6 /64) may make a minute;
   * past it they answer 429 too_many_requests with Retry-After.
   */
  OAUTH_TOKEN_REQUESTS_PER_MINUTE: int(1, 1_000_000, 60),
  /**
   * The URL people and MCP clients reach agentdb at (https://agentdb.example.com), which names the
   * OAuth issuer and resources. Unset: each request's own origin (under TRUST_PROXY, the proxy's).
   */
  PUBLIC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as https://agentdb.example.com' }).optional(),
  /**
   * How long the HTTP server keeps who a key is without asking Redis again. Registry changes are
   * announced, so a revoked key stops at once; this bounds it if an announcement is missed. 0: off.
   */
  KEY_CACHE_TTL_MS: int(0, 600_000, 5000),
  /**
   * Behind a TLS proxy: which proxies' X-Forwarded-Proto/-Host/-For to believe. `false` (none,
   * the default), `true` (any), a hop count, or comma-separated addresses or CIDRs. Without it
   * the session cookie is not marked Secure and the sign-in form's Origin check sees the
   * proxy's Host, not the page's.
   */
  TRUST_PROXY: z
    .string()
    .default('false')
    .transform((v, ctx): boolean | number | string[] => {
      const t = v.trim();
      if (t === 'false' || t === '') return false;
      if (t === 'true') return true;
      if (/^\d+$/.test(t)) return Number(t);
      const list = t
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean);
      if (list.every((x) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(x))) return list;
      ctx.addIssue({ code: 'custom', message: 'TRUST_PROXY is false, true, a hop count, or comma-separated IP addresses or CIDRs' });
      return z.NEVER;
    }),
});

/** This part's entries of the environment's schema, which `loadConfig` joins. */
export const httpEnv = httpSchema.shape;

/** This part's fields of the frozen `Config`. */
export interface HttpConfig {
  /** HTTP_WAIT_MS: the longest a `/v1/calls` request waits before answering where its call stands. */
  readonly httpWaitMs: number;
  /** HTTP_REQUEST_TIMEOUT_MS, HTTP_CONNECTIONS_PER_ADDRESS, HTTP_MAX_CONNECTIONS (src/http/connection-limits.ts). */
  readonly httpConnections: { readonly requestTimeoutMs: number; readonly perAddress: number; readonly total: number };
  /** EXPORTS_PER_MEMBER, EXPORTS_PER_WORKSPACE, EXPORTS_MAX (src/shards/export-slots.ts). */
  readonly exportBounds: { readonly perMember: number; readonly perWorkspace: number; readonly total: number };
  /** EXPORT_MAX_BYTES: the most one CSV export sends (src/shards/data-browser.ts). */
  readonly exportMaxBytes: number;
  /** DOWNLOAD_STALL_SECONDS, in ms (src/policy/stall-deadline.ts). */
  readonly downloadStallMs: number;
  /** MCP_APPROVAL_WAIT_MS: the longest an MCP tool call (without a task) waits for a decision before answering that it is pending. */
  readonly mcpApprovalWaitMs: number;
  /** MCP_ALLOWED_ORIGINS, each an origin (`https://app.example.com`). */
  readonly mcpAllowedOrigins: readonly string[];
  /** MCP_ALLOWED_HOSTS: host names without ports, or `*` for any. */
  readonly mcpAllowedHosts: readonly string[] | '*';
  /** WEB_SESSION_TTL_S: how long a web sign-in lives without a request (sliding), in seconds. */
  readonly webSessionTtlS: number;
  /** OAuth sign-in (OAUTH, OAUTH_*_TTL_S); undefined with OAUTH=off. */
  readonly oauth?: {
    readonly accessTtlS: number;
    readonly refreshTtlS: number;
    readonly unconsentedClientsMax: number;
    readonly tokenRequestsPerMinute: number;
  };
  /** PUBLIC_URL, without a trailing slash. */
  readonly publicUrl?: string;
  /** KEY_CACHE_TTL_MS: how long who a key is stays known without asking Redis; 0 asks each time. */
  readonly keyCacheTtlMs: number;
  /** Fastify's `trustProxy` (TRUST_PROXY). */
  readonly trustProxy: boolean | number | string[];
}

/** This part's fields of `Config`, from its variables as validated. */
export function httpConfig(e: z.infer<typeof httpSchema>): HttpConfig {
  return {
    httpWaitMs: e.HTTP_WAIT_MS,
    httpConnections: Object.freeze({
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      perAddress: e.HTTP_CONNECTIONS_PER_ADDRESS,
      total: e.HTTP_MAX_CONNECTIONS,
    }),
    exportBounds: Object.freeze({ perMember: e.EXPORTS_PER_MEMBER, perWorkspace: e.EXPORTS_PER_WORKSPACE, total: e.EXPORTS_MAX }),
    exportMaxBytes: e.EXPORT_MAX_BYTES,
    downloadStallMs: e.DOWNLOAD_STALL_SECONDS * 1000,
    mcpApprovalWaitMs: e.MCP_APPROVAL_WAIT_MS,
    mcpAllowedOrigins: Object.freeze(e.MCP_ALLOWED_ORIGINS),
    mcpAllowedHosts: e.MCP_ALLOWED_HOSTS === '*' ? '*' : Object.freeze(e.MCP_ALLOWED_HOSTS),
    webSessionTtlS: e.WEB_SESSION_TTL_S,
    ...(e.OAUTH === 'on'
      ? {
          oauth: Object.freeze({
            accessTtlS: e.OAUTH_ACCESS_TOKEN_TTL_S,
            refreshTtlS: e.OAUTH_REFRESH_TOKEN_TTL_S,
            unconsentedClientsMax: e.OAUTH_UNCONSENTED_CLIENTS_MAX,
            tokenRequestsPerMinute: e.OAUTH_TOKEN_REQUESTS_PER_MINUTE,
          }),
        }
      : {}),
    ...(e.PUBLIC_URL ? { publicUrl: e.PUBLIC_URL.replace(/\/+$/, '') } : {}),
    keyCacheTtlMs: e.KEY_CACHE_TTL_MS,
    trustProxy: e.TRUST_PROXY,
  };
}
