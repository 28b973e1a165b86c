import type { FastifyRequest } from 'fastify';
import { ACCESS_TOKEN_PREFIX } from '../../oauth/oauth-token-format.ts';
import type { KeyAuthenticator, Principal } from '../../registry/principal.ts';
import { bearerOf } from '../key-auth.ts';
import { type OAuthDeps, resourceMetadataUrl, resourceOf } from './oauth-deps.ts';

/**
 * Who a request to an MCP endpoint speaks for: an agent or member key as before, or an OAuth
 * access token issued for this very endpoint (RFC 8707: a token for another resource is no token
 * here). With OAuth on, a refusal's `WWW-Authenticate` names the endpoint's protected resource
 * metadata (RFC 9728 §5.1), which is how a client that holds nothing learns where to sign in.
 */
export class McpBearer {
  constructor(
    private readonly keys: KeyAuthenticator,
    private readonly oauth?: OAuthDeps,
  ) {}

  /** The request's principal; undefined for no token, or any token that is not an active one. */
  async principal(request: FastifyRequest): Promise<Principal | undefined> {
    const token = bearerOf(request.headers.authorization);
    if (!token) return undefined;
    if (this.oauth && token.startsWith(ACCESS_TOKEN_PREFIX)) return this.oauth.grants.authenticate(token, resourceOf(request, this.oauth));
    return this.keys.authenticate(token);
  }

  /**
   * Who the request's key or token was last found to be, for a request made while Redis does not
   * answer (`PrincipalCache.lastKnown`): only for answers that run nothing and show no data.
   */
  lastKnown(request: FastifyRequest): Principal | undefined {
    const token = bearerOf(request.headers.authorization);
    if (!token) return undefined;
    if (this.oauth && token.startsWith(ACCESS_TOKEN_PREFIX)) return this.oauth.grants.lastKnown(token, resourceOf(request, this.oauth));
    return this.keys.lastKnown(token);
  }

  /**
   * What a 401 from this endpoint says went wrong, by what the request sent: nothing (or no
   * Bearer), an access token that is no longer good here, or a key that is not an active one.
   * Told apart by the header alone, so it says nothing of which keys or tokens exist; the key's
   * words sent to a client holding a token only sent its person looking for a key.
   */
  refusal(request: FastifyRequest): string {
    const token = bearerOf(request.headers.authorization);
    if (!token)
      return this.oauth
        ? 'Unauthorized: send Authorization: Bearer <an active agent or member key, or an access token from signing in>.'
        : 'Unauthorized: send Authorization: Bearer <an active agent or member key>.';
    if (this.oauth && token.startsWith(ACCESS_TOKEN_PREFIX))
      return 'Unauthorized: the access token is expired, revoked or for another endpoint: refresh it, or sign in again.';
    return 'Unauthorized: the key sent is not an active agent or member key.';
  }

  /** The `WWW-Authenticate` value of a 401 from this endpoint. */
  challenge(request: FastifyRequest): string {
    if (!this.oauth) return 'Bearer realm="agentdb"';
    const sent = bearerOf(request.headers.authorization) !== undefined;
    return `Bearer realm="agentdb", resource_metadata="${resourceMetadataUrl(request, this.oauth)}"${sent ? ', error="invalid_token"' : ''}`;
  }
}
