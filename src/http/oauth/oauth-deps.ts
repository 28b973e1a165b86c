import type { FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.ts';
import type { FetchDocument } from '../../oauth/client-metadata-document.ts';
import { OAuthClients } from '../../oauth/oauth-clients.ts';
import { type GrantOptions, OAuthGrants } from '../../oauth/oauth-grants.ts';
import { OAuthTokenRequests } from '../../oauth/oauth-token-requests.ts';
import { keysFor } from '../../redis/keys.ts';
import type { MemberRegistry } from '../../registry/members.ts';

/** What OAuth sign-in needs: registered clients, grants and tokens, and the public URL. */
export interface OAuthDeps {
  clients: OAuthClients;
  grants: OAuthGrants;
  /** The token and revocation endpoints' requests, counted by address. */
  tokenRequests: OAuthTokenRequests;
  /**
   * PUBLIC_URL: the URL people and clients reach agentdb at, which names the issuer and the
   * resources. Absent, each request's own origin (Host, or X-Forwarded-* under TRUST_PROXY).
   */
  publicUrl?: string;
}

/** The issuer and base of every OAuth URL: PUBLIC_URL, or the request's origin. */
export function publicBase(request: FastifyRequest, deps: OAuthDeps): string {
  return (deps.publicUrl ?? `${request.protocol}://${request.host}`).replace(/\/+$/, '');
}

/** The resource (RFC 8707) an MCP request is for: the endpoint's URL without its query. */
export function resourceOf(request: FastifyRequest, deps: OAuthDeps): string {
  return publicBase(request, deps) + request.url.split('?')[0]!;
}

/** Where an endpoint's protected resource metadata is (RFC 9728 §3.1: the path after the well-known name). */
export function resourceMetadataUrl(request: FastifyRequest, deps: OAuthDeps): string {
  return `${publicBase(request, deps)}/.well-known/oauth-protected-resource${request.url.split('?')[0]}`;
}

/**
 * OAuth sign-in from the config, for an entry point (`agentdb start`, tests); undefined with
 * OAUTH=off. `principals`: the server's cache of keys, which access tokens then share; `now`
 * lets a test move the clock past a token's expiry, `fetchDocument` serve client id metadata
 * documents from hosts of its own.
 */
export function createOAuthDeps(
  config: Config,
  shared: { redis: Redis; members: MemberRegistry },
  opts: Pick<GrantOptions, 'now' | 'principals'> & { fetchDocument?: FetchDocument } = {},
): OAuthDeps | undefined {
  if (!config.oauth) return undefined;
  const keys = keysFor(config.prefix);
  const { fetchDocument, ...grantOpts } = opts;
  return {
    clients: new OAuthClients(shared.redis, keys, fetchDocument, config.oauth.unconsentedClientsMax),
    grants: new OAuthGrants(shared.redis, keys, shared.members, { ...config.oauth, ...grantOpts }),
    tokenRequests: new OAuthTokenRequests(shared.redis, keys, config.oauth.tokenRequestsPerMinute),
    ...(config.publicUrl ? { publicUrl: config.publicUrl } : {}),
  };
}
