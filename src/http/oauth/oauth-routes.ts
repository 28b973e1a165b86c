import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { InvalidClientError, InvalidRequestError, OAuthError, UnsupportedGrantTypeError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthMetadata, OAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import { GRANT_SCOPES } from '../../contracts/grant-scope.ts';
import { isMcpEndpointPath } from '../../oauth/mcp-resource.ts';
import { AUTH_METHODS } from '../../oauth/oauth-clients.ts';
import { RetryLaterError } from '../../oauth/oauth-token-requests.ts';
import { type OAuthDeps, publicBase } from './oauth-deps.ts';

/**
 * Why these endpoints are ported rather than mounted: the MCP SDK's auth router and bearer
 * middleware (server/auth/*) are Express handlers, and agentdb is Fastify 5; bridging them would
 * bring Express and its body parsers into the server for four small endpoints. What is reused is
 * what fixes the wire: the SDK's zod schemas and types (shared/auth.js) for metadata, client
 * registration and tokens, and its OAuthError classes, whose `errorCode`s are RFC 6749's.
 */

/** Token and registration bodies are small; anything far larger is not one. */
const BODY_LIMIT = 16 * 1024;

/** Where the person consents (web page) and where clients post (these routes). */
export const OAUTH_PATHS = { authorize: '/oauth/authorize', token: '/oauth/token', register: '/oauth/register', revoke: '/oauth/revoke' } as const;

/** RFC 8414 metadata of agentdb as its own authorization server. */
export function authorizationServerMetadata(base: string): OAuthMetadata {
  return {
    issuer: base,
    authorization_endpoint: base + OAUTH_PATHS.authorize,
    token_endpoint: base + OAUTH_PATHS.token,
    registration_endpoint: base + OAUTH_PATHS.register,
    revocation_endpoint: base + OAUTH_PATHS.revoke,
    // What a person may grant on the consent page, each including the ones before it.
    scopes_supported: [...GRANT_SCOPES],
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: [...AUTH_METHODS],
    revocation_endpoint_auth_methods_supported: [...AUTH_METHODS],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: true,
  };
}

function oauthError(reply: FastifyReply, err: OAuthError): FastifyReply {
  // A limit that knows when it lets go says it as any HTTP client reads it.
  if (err instanceof RetryLaterError) reply.header('retry-after', String(err.retryAfterS));
  const status = { invalid_client: 401, server_error: 500, too_many_requests: 429 }[err.errorCode] ?? 400;
  return reply.code(status).header('cache-control', 'no-store').send(err.toResponseObject());
}

/**
 * A token or revocation request's fields, each text: a form's always are, but a JSON body's may
 * be anything, and a number or array taken as text threw in the handler (500, and a stack trace
 * logged for each request of someone who holds nothing: hostile review T1).
 * @throws InvalidRequestError for a body that is not an object of text fields.
 */
function textBody(body: unknown): Record<string, string> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new InvalidRequestError('Send the request as application/x-www-form-urlencoded.');
  for (const [k, v] of Object.entries(body))
    if (typeof v !== 'string') throw new InvalidRequestError(`${k.slice(0, 40)} must be text (send the request as application/x-www-form-urlencoded).`);
  return body as Record<string, string>;
}

/** The client's id and secret, from HTTP Basic (RFC 6749 §2.3.1) or the body. */
function clientCredentials(request: FastifyRequest, body: Record<string, string>): { id?: string; secret?: string } {
  const basic = /^Basic\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
  if (basic) {
    const text = Buffer.from(basic, 'base64').toString('utf8');
    const colon = text.indexOf(':');
    if (colon > 0) {
      try {
        return { id: decodeURIComponent(text.slice(0, colon)), secret: decodeURIComponent(text.slice(colon + 1)) };
      } catch {
        throw new InvalidClientError('The Basic credentials are not percent-encoded (RFC 6749 §2.3.1).');
      }
    }
  }
  return { ...(body.client_id ? { id: body.client_id } : {}), ...(body.client_secret ? { secret: body.client_secret } : {}) };
}

/**
 * OAuth 2.1 as the MCP authorization spec (2025-11-25) asks, agentdb being both the resource
 * server and its authorization server on one origin: protected resource metadata (RFC 9728) for
 * each MCP endpoint, authorization server metadata (RFC 8414), dynamic client registration
 * (RFC 7591), the token endpoint (authorization code with PKCE S256, rotating refresh tokens)
 * and revocation (RFC 7009). The consent page is the web page's (web/consent-routes.ts).
 */
export function oauthRoutes(deps: OAuthDeps): FastifyPluginAsync {
  return async (app) => {
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });
    // Browser-based MCP clients read metadata and post tokens from their own origin; nothing
    // here rides on cookies, so any origin may.
    app.addHook('onRequest', async (request, reply) => {
      reply.header('access-control-allow-origin', '*');
      if (request.method === 'OPTIONS') {
        return reply
          .code(204)
          .header('access-control-allow-methods', 'GET, POST, OPTIONS')
          .header('access-control-allow-headers', 'authorization, content-type, mcp-protocol-version')
          .send();
      }
    });
    const cors = { method: 'OPTIONS' as const, handler: async () => undefined };
    for (const url of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/*', '/.well-known/oauth-authorization-server'])
      app.route({ ...cors, url });
    for (const url of Object.values(OAUTH_PATHS).filter((p) => p !== OAUTH_PATHS.authorize)) app.route({ ...cors, url });

    const resourceMetadata = (request: FastifyRequest, reply: FastifyReply, path: string) => {
      if (!isMcpEndpointPath(path)) return reply.code(404).send({ error: 'not_found', error_description: 'No MCP endpoint there.' });
      const base = publicBase(request, deps);
      const body: OAuthProtectedResourceMetadata = {
        resource: base + path,
        authorization_servers: [base],
        bearer_methods_supported: ['header'],
        scopes_supported: [...GRANT_SCOPES],
        resource_name: 'agentdb',
      };
      return reply.send(body);
    };
    // The bare well-known name describes /mcp, the endpoint a person pastes.
    app.get('/.well-known/oauth-protected-resource', (request, reply) => resourceMetadata(request, reply, '/mcp'));
    app.get('/.well-known/oauth-protected-resource/*', (request, reply) => resourceMetadata(request, reply, `/${(request.params as { '*': string })['*']}`));
    app.get('/.well-known/oauth-authorization-server', (request, reply) => reply.send(authorizationServerMetadata(publicBase(request, deps))));

    app.post(OAUTH_PATHS.register, { bodyLimit: BODY_LIMIT }, async (request, reply) => {
      try {
        const info = await deps.clients.register(request.body, request.ip);
        return reply.code(201).header('cache-control', 'no-store').send(info);
      } catch (err) {
        if (err instanceof OAuthError) return oauthError(reply, err);
        throw err;
      }
    });

    app.post(OAUTH_PATHS.token, { bodyLimit: BODY_LIMIT }, async (request, reply) => {
      try {
        await deps.tokenRequests.spend(request.ip);
        const body = textBody(request.body);
        const creds = clientCredentials(request, body);
        const client = await deps.clients.authenticate(creds.id, creds.secret, request.ip);
        const tokens =
          body.grant_type === 'authorization_code'
            ? await deps.grants.exchangeCode(client, { code: body.code, verifier: body.code_verifier, redirectUri: body.redirect_uri, resource: body.resource })
            : body.grant_type === 'refresh_token'
              ? await deps.grants.refresh(client, { refreshToken: body.refresh_token, resource: body.resource })
              : undefined;
        if (!tokens) throw new UnsupportedGrantTypeError('grant_type must be authorization_code or refresh_token.');
        return reply.header('cache-control', 'no-store').header('pragma', 'no-cache').send(tokens);
      } catch (err) {
        if (err instanceof OAuthError) return oauthError(reply, err);
        throw err;
      }
    });

    app.post(OAUTH_PATHS.revoke, { bodyLimit: BODY_LIMIT }, async (request, reply) => {
      try {
        await deps.tokenRequests.spend(request.ip);
        const body = textBody(request.body);
        const creds = clientCredentials(request, body);
        const client = await deps.clients.authenticate(creds.id, creds.secret, request.ip);
        if (!body.token) throw new InvalidRequestError('token is required.');
        await deps.grants.revokeToken(client, body.token);
        return reply.code(200).send({});
      } catch (err) {
        if (err instanceof OAuthError) return oauthError(reply, err);
        throw err;
      }
    });
  };
}
