import { NAME_PATTERN } from '../contracts/name-pattern.ts';

/**
 * An MCP endpoint's URL, a grant's resource (RFC 8707): the base it is served under, then `/mcp`,
 * `/mcp/w/<workspace>` or `/mcp/t/<team>`. The base is PUBLIC_URL, whose path may hold a prefix
 * (`https://x.example/agentdb`, a proxy serving agentdb under a path), or the request's origin;
 * split at the last `/mcp` that leaves an endpoint, as a prefix may hold `/mcp` too.
 */
const ENDPOINT = /^(.*)\/mcp(?:\/([wt])\/([^/]+))?$/;

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
  const m = ENDPOINT.exec(resource);
  if (!m || (base !== undefined && m[1] !== base)) return false;
  return m[2] === undefined || (m[2] === 'w' && m[3] === workspace);
}

/**
 * Whether `path` (a request's, below the base) is one of the MCP endpoints: `/mcp`,
 * `/mcp/w/<workspace>` or `/mcp/t/<team>`, each name a valid one (the protected resource
 * metadata is served for these alone).
 */
export function isMcpEndpointPath(path: string): boolean {
  const m = ENDPOINT.exec(path);
  return m !== null && m[1] === '' && (m[3] === undefined || NAME_PATTERN.test(m[3]));
}
