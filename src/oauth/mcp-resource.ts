import { NAME_PATTERN } from '../contracts/name-pattern.ts';

/**
 * An MCP endpoint's URL, a grant's resource (RFC 8707): the base it is served under, then `/mcp`,
 * `/mcp/w/<workspace>` or `/mcp/t/<team>`. The base is PUBLIC_URL, whose path may hold a prefix
 * (`https://x.example/agentdb`, a proxy serving agentdb under a path), or the request's origin.
 * A scoped endpoint is tried first: one pattern with an optional scope read `/mcp/w/mcp` (the
 * workspace `mcp`) as a base `/mcp/w` and the bare `/mcp` (review R1).
 */
const SCOPED = /^(.*)\/mcp\/([wt])\/([^/]+)$/;
const BARE = /^(.*)\/mcp$/;

interface Endpoint {
  base: string;
  scope?: { kind: 'w' | 't'; name: string };
}

/** `url` read as an endpoint under `base`, when given (the rest after it), else under any base. */
function endpointOf(url: string, base?: string): Endpoint | undefined {
  if (base !== undefined) {
    if (!url.startsWith(base)) return undefined;
    const rest = endpointOf(url.slice(base.length));
    return rest?.base === '' ? { ...rest, base } : undefined;
  }
  const m = SCOPED.exec(url);
  if (m) return { base: m[1]!, scope: { kind: m[2] as 'w' | 't', name: m[3]! } };
  const b = BARE.exec(url);
  return b ? { base: b[1]! } : undefined;
}

/**
 * Whether a token may be issued for `resource` to a member of `workspace`: one of this server's
 * MCP endpoints that serves them tools, `<base>/mcp` or `<base>/mcp/w/<their workspace>`. Not a
 * team endpoint (`<base>/mcp/t/<team>`): it lists no tools, so a grant for it was a token good
 * for nothing, and RFC 8707 §2 has a resource the server issues no token for refused with
 * invalid_target. `base`: this server's (PUBLIC_URL, or the request's origin), at authorization;
 * a refresh leaves it out, its grant's resource having been checked against the base then, and
 * the endpoint alone decides (the refresh's check read the path from its start, so under a
 * PUBLIC_URL with a path a team endpoint's grant was refreshed).
 */
export function servesTools(resource: string, workspace: string, base?: string): boolean {
  const e = endpointOf(resource, base);
  if (!e) return false;
  return e.scope === undefined || (e.scope.kind === 'w' && e.scope.name === workspace);
}

/**
 * Whether `path` (a request's, below the base) is one of the MCP endpoints: `/mcp`,
 * `/mcp/w/<workspace>` or `/mcp/t/<team>`, each name a valid one (the protected resource
 * metadata is served for these alone).
 */
export function isMcpEndpointPath(path: string): boolean {
  const e = endpointOf(path, '');
  return e !== undefined && (e.scope === undefined || NAME_PATTERN.test(e.scope.name));
}
