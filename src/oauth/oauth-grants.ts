import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { InvalidGrantError, InvalidRequestError, InvalidTargetError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { type GrantLevel, narrowerLevel, roleLevel, scopeOfLevel } from '../contracts/grant-scope.ts';
import type { Keys } from '../redis/keys.ts';
import { type ScriptedRedis, withScripts } from '../redis/lua-scripts.ts';
import type { Member, MemberRegistry } from '../registry/members.ts';
import type { Principal } from '../registry/principal.ts';
import type { PrincipalCache } from '../registry/principal-cache.ts';
import { hashKey } from '../registry/secret-key.ts';
import { servesTools } from './mcp-resource.ts';
import { accessEnded, cacheKey } from './access-token-cache.ts';
import { CLIENT_UNUSED_TTL_S, type OAuthClient } from './oauth-clients.ts';
import type { AccessRecord, CodeRecord, OAuthGrant } from './oauth-grant-records.ts';
import { OAuthGrantStore } from './oauth-grant-store.ts';
import { RetryLaterError } from './oauth-token-requests.ts';
import { ACCESS_TOKEN_PREFIX, CODE_PREFIX, mintToken, PKCE_VERIFIER, REFRESH_TOKEN_PREFIX, s256, TOKEN_SHAPE } from './oauth-token-format.ts';

/** Token lifetimes (OAUTH_ACCESS_TOKEN_TTL_S, OAUTH_REFRESH_TOKEN_TTL_S) and a clock tests may set. */
export interface GrantOptions {
  accessTtlS: number;
  refreshTtlS: number;
  /** OAuth 2.1 §4.1.2 recommends at most 10 minutes; a client exchanges it at once. */
  codeTtlS?: number;
  now?: () => number;
  /** The server's cache of keys (KEY_CACHE_TTL_MS), for access tokens too: else each MCP request made three Redis lookups in turn. */
  principals?: PrincipalCache;
}

/** A member's grants past this end, oldest first: a client signing in in a loop cannot fill Redis. */
export const MAX_GRANTS_PER_MEMBER = 50;

/**
 * The records a grant keeps of its code and refresh tokens, the live one and those spent (kept,
 * marked, so a copy shown again ends the grant). Past it the oldest spent go: each was kept for
 * the refresh lifetime (30 days), so a grant refreshed in a loop grew Redis by a key a refresh,
 * bounded only by the token endpoint's rate per address (hostile review T14). A grant is also
 * given at most this many of them an access token's life, its sign-in's code and first refresh
 * token among them ({@link OAuthGrants.refresh}), so a
 * spent token goes only once older than that life: the client it was stolen from, asking when its
 * access token ends, still shows it in time to end the grant. A client refreshes once a life.
 */
export const MAX_TOKEN_RECORDS_PER_GRANT = 32;

/**
 * Authorization codes, grants, and the tokens issued under them, in Redis. Codes and tokens are
 * kept only as their sha256 (a copy of Redis holds nothing usable); access tokens are short
 * lived, refresh tokens rotate on every use (a used one is gone). The principal an access token
 * resolves to is a member's, as a member key's would be: the same calls, the same role.
 */
export class OAuthGrants {
  private readonly now: () => number;
  private readonly codeTtlS: number;
  private readonly redis: ScriptedRedis;
  private readonly store: OAuthGrantStore;

  constructor(
    redis: Redis,
    private readonly keys: Keys,
    private readonly members: MemberRegistry,
    private readonly opts: GrantOptions,
  ) {
    this.redis = withScripts(redis);
    this.now = opts.now ?? Date.now;
    this.codeTtlS = opts.codeTtlS ?? 120;
    this.store = new OAuthGrantStore(this.redis, keys, members);
  }

  /**
   * The person's consent: a new grant for `client` to act as `member` at `resource`, as far as
   * `level` reaches, and the code the client exchanges for its first tokens.
   */
  async consent(
    member: Member,
    client: OAuthClient,
    req: { redirectUri: string; redirectUriGiven: boolean; challenge: string; resource: string; level: GrantLevel },
  ): Promise<string> {
    const now = this.now();
    const grant: OAuthGrant = {
      id: randomBytes(12).toString('base64url'),
      workspace: member.workspace,
      member: member.name,
      memberSince: member.createdAt,
      clientId: client.clientId,
      clientName: client.clientName,
      resource: req.resource,
      // Never past the role, whatever the form said: the page offers no more, and this keeps it so.
      level: narrowerLevel(req.level, roleLevel(member.role)),
      createdAt: now,
      refreshedAt: now,
    };
    const code = mintToken(CODE_PREFIX);
    const record: CodeRecord = {
      grantId: grant.id,
      clientId: client.clientId,
      redirectUri: req.redirectUri,
      redirectUriGiven: req.redirectUriGiven,
      challenge: req.challenge,
      resource: req.resource,
    };
    const index = this.keys.oauth('grants', `${member.workspace}/${member.name}`);
    const codeKey = this.keys.oauth('code', hashKey(code));
    const tokens = this.keys.oauth('tokens', grant.id);
    // The grant waits, unused, as long as its code; its first tokens give it their lifetime.
    const res = await this.redis
      .multi()
      .set(this.keys.oauth('grant', grant.id), JSON.stringify(grant), 'EX', this.codeTtlS)
      .set(codeKey, JSON.stringify(record), 'EX', this.codeTtlS)
      // The code among the grant's records, so the grant ended takes it along (oauth-grant-drop.lua).
      .zadd(tokens, now, codeKey)
      .expire(tokens, this.codeTtlS)
      .zadd(index, now, grant.id)
      .expire(index, this.opts.refreshTtlS)
      .zrange(index, 0, -(MAX_GRANTS_PER_MEMBER + 1))
      .exec();
    const ended = (res?.[6]?.[1] as string[] | undefined) ?? [];
    // Held before the oldest are ended, so ending one of the same client never lets it go.
    await this.store.holdClient(client.clientId, grant.id, Math.max(CLIENT_UNUSED_TTL_S, this.codeTtlS));
    for (const id of ended) await this.store.revoke(member.workspace, member.name, id);
    return code;
  }

  /**
   * The token request of `authorization_code` (OAuth 2.1 §4.1.3): the code once, by the client it
   * was issued to, with the redirect URI and resource of its authorization request, and the PKCE
   * verifier whose S256 is the challenge.
   * @throws InvalidGrantError for a code unknown, used, lapsed, another client's, or a wrong verifier.
   */
  async exchangeCode(client: OAuthClient, p: { code?: string; verifier?: string; redirectUri?: string; resource?: string }): Promise<OAuthTokens> {
    if (!p.code) throw new InvalidRequestError('code is required.');
    if (!p.verifier) throw new InvalidRequestError('code_verifier is required (PKCE S256).');
    // A code is spent by its first exchange, right or wrong, so a guessed verifier has one try.
    const raw = TOKEN_SHAPE.test(p.code) ? await this.store.spend(this.keys.oauth('code', hashKey(p.code))) : undefined;
    if (!raw) throw new InvalidGrantError('The code is unknown, already used or expired: sign in again.');
    const code = JSON.parse(raw) as CodeRecord;
    if (code.clientId !== client.clientId) throw new InvalidGrantError('The code was issued to another client.');
    if (code.redirectUriGiven && p.redirectUri === undefined)
      throw new InvalidRequestError('redirect_uri is required: the authorization request named one (OAuth 2.1 §4.1.3).');
    if (p.redirectUri !== undefined && p.redirectUri !== code.redirectUri) throw new InvalidGrantError('redirect_uri differs from the authorization request.');
    if (p.resource !== undefined && p.resource !== code.resource) throw new InvalidTargetError('resource differs from the authorization request.');
    if (!PKCE_VERIFIER.test(p.verifier) || s256(p.verifier) !== code.challenge) {
      await this.store.dropGrant(code.grantId, code.clientId);
      throw new InvalidGrantError('code_verifier does not match the code_challenge.');
    }
    const grant = await this.store.grant(code.grantId);
    if (!grant) throw new InvalidGrantError('The grant was revoked.');
    return this.issue(grant);
  }

  /**
   * The token request of `refresh_token`: the refresh token once (it rotates), by its client,
   * for its grant's resource.
   * @throws InvalidGrantError for a refresh token unknown, used, revoked or another client's.
   */
  async refresh(client: OAuthClient, p: { refreshToken?: string; resource?: string }): Promise<OAuthTokens> {
    if (!p.refreshToken) throw new InvalidRequestError('refresh_token is required.');
    const key = this.keys.oauth('refresh', hashKey(p.refreshToken));
    if (!TOKEN_SHAPE.test(p.refreshToken)) throw new InvalidGrantError('The refresh token is unknown, already used, expired or revoked: sign in again.');
    // Refused before the token is spent, so the client refreshes with it once told to.
    const waitS = await this.store.refreshWait(key, this.now(), this.opts.accessTtlS, MAX_TOKEN_RECORDS_PER_GRANT);
    if (waitS > 0)
      throw new RetryLaterError(
        // Counted by the grant's records, so a sign-in's code and first refresh token count: it
        // said "refreshed 32 times" after 30 refreshes (session 35, N11).
        `This grant was given ${MAX_TOKEN_RECORDS_PER_GRANT} tokens within an access token's life (${this.opts.accessTtlS} s), its sign-in's code and refresh tokens included: refresh again in ${waitS} s.`,
        waitS,
      );
    const grantId = await this.store.spend(key);
    const grant = grantId ? await this.store.grant(grantId) : undefined;
    if (!grant) throw new InvalidGrantError('The refresh token is unknown, already used, expired or revoked: sign in again.');
    if (grant.clientId !== client.clientId) throw new InvalidGrantError('The refresh token was issued to another client.');
    if (p.resource !== undefined && p.resource !== grant.resource) throw new InvalidTargetError('resource differs from the grant.');
    // A grant made for a team endpoint before consent refused them (it lists no tools): no more tokens for nothing.
    if (!servesTools(grant.resource, grant.workspace))
      throw new InvalidTargetError('A team endpoint lists no tools, so no token is issued for it: sign in again for /mcp.');
    return this.issue(grant);
  }

  /**
   * Who an access token acts for at `resource` (the MCP endpoint's URL it was sent to): the
   * member, with the role the registry gives them now and what the grant reaches within it
   * (`granted`, which the call's access check enforces). Undefined for a token unknown, expired,
   * revoked, for another resource, or whose member is gone.
   */
  async authenticate(token: string, resource: string): Promise<Principal | undefined> {
    if (!TOKEN_SHAPE.test(token)) return undefined;
    const hash = hashKey(token);
    // By the resource too: the same token sent to another endpoint is no token there.
    const cache = this.opts.principals;
    if (!cache) return (await this.lookup(hash, resource))?.principal;
    return cache.through(cacheKey(hash, resource), () => this.lookup(hash, resource), this.now());
  }

  /** Who `token` was last found to act for at `resource` while Redis does not answer (`PrincipalCache.lastKnown`). */
  lastKnown(token: string, resource: string): Principal | undefined {
    if (!TOKEN_SHAPE.test(token)) return undefined;
    return this.opts.principals?.lastKnown(cacheKey(hashKey(token), resource), this.now());
  }

  /** Who access token `hash` acts for at `resource`, and when it lapses: read from Redis ({@link authenticate}). */
  private async lookup(hash: string, resource: string): Promise<{ principal: Principal; lapses: number } | undefined> {
    const raw = await this.redis.get(this.keys.oauth('access', hash));
    if (!raw) return undefined;
    const access = JSON.parse(raw) as AccessRecord;
    if (access.expiresAt <= this.now()) return undefined;
    const grant = await this.store.grant(access.grantId);
    if (!grant || grant.resource !== resource) return undefined;
    const member = await this.members.get(grant.workspace, grant.member);
    if (!member || member.createdAt !== grant.memberSince) return undefined;
    // The role as it is now, narrowed by what the person granted (an admin made a member since loses drop).
    const granted = narrowerLevel(grant.level ?? roleLevel(member.role), roleLevel(member.role));
    const principal: Principal = {
      kind: 'member',
      workspace: member.workspace,
      member: { name: member.name, role: member.role, granted },
      since: member.createdAt,
    };
    return { principal, lapses: access.expiresAt };
  }

  /**
   * A member's grants, newest first (the web page's Connected apps); an earlier member's of the
   * same name are ended ({@link OAuthGrantStore.list}).
   */
  list(workspace: string, member: string): Promise<OAuthGrant[]> {
    return this.store.list(workspace, member);
  }

  /** Ends every grant of a member, tokens and refresh tokens alike ({@link OAuthGrantStore.revokeMember}). */
  revokeMember(workspace: string, member: string): Promise<number> {
    return this.store.revokeMember(workspace, member);
  }

  /** Revokes a member's own grant ({@link OAuthGrantStore.revoke}); false when they have no such grant. */
  revoke(workspace: string, member: string, grantId: string): Promise<boolean> {
    return this.store.revoke(workspace, member, grantId);
  }

  /**
   * RFC 7009 revocation by the client itself: a refresh token ends its grant, an access token
   * itself. Unknown tokens are not an error (§2.2).
   */
  async revokeToken(client: OAuthClient, token: string): Promise<void> {
    if (!TOKEN_SHAPE.test(token)) return;
    const h = hashKey(token);
    if (token.startsWith(REFRESH_TOKEN_PREFIX)) {
      const grantId = await this.redis.get(this.keys.oauth('refresh', h));
      const grant = grantId ? await this.store.grant(grantId) : undefined;
      if (grant && grant.clientId === client.clientId) await this.store.revoke(grant.workspace, grant.member, grant.id);
      return;
    }
    const raw = await this.redis.get(this.keys.oauth('access', h));
    const grant = raw ? await this.store.grant((JSON.parse(raw) as AccessRecord).grantId) : undefined;
    if (grant?.clientId === client.clientId)
      await this.redis.multi().del(this.keys.oauth('access', h)).publish(this.keys.registryChanges, accessEnded(h)).exec();
  }

  /** New tokens for `grant`, while its member is the one who consented (not revoked, not re-added); else the grant ends. */
  private async issue(grant: OAuthGrant): Promise<OAuthTokens> {
    const member = await this.members.get(grant.workspace, grant.member);
    if (!member || member.createdAt !== grant.memberSince) {
      await this.store.revoke(grant.workspace, grant.member, grant.id);
      throw new InvalidGrantError('The member who granted this is no longer in the workspace: sign in again.');
    }
    const access = mintToken(ACCESS_TOKEN_PREFIX);
    const refresh = mintToken(REFRESH_TOKEN_PREFIX);
    const now = this.now();
    const { accessTtlS, refreshTtlS } = this.opts;
    const next: OAuthGrant = { ...grant, refreshedAt: now, accessHash: hashKey(access) };
    const record: AccessRecord = { grantId: grant.id, expiresAt: now + accessTtlS * 1000 };
    // Only while the grant is still there: revoked since it was read (a person's revoke landing
    // mid-request), writing it back would bring it back, out of the member's list.
    const grantKey = this.keys.oauth('grant', grant.id);
    const issued = await this.redis.agentdbOauthIssue(
      grantKey,
      this.keys.oauth('access', hashKey(access)),
      this.keys.oauth('refresh', hashKey(refresh)),
      grant.accessHash ? this.keys.oauth('access', grant.accessHash) : grantKey,
      this.keys.oauth('tokens', grant.id),
      JSON.stringify(next),
      JSON.stringify(record),
      grant.id,
      String(accessTtlS),
      String(refreshTtlS),
      // The access token it replaces ends: announced, for the servers that cached it.
      this.keys.registryChanges,
      String(now),
      String(MAX_TOKEN_RECORDS_PER_GRANT),
      grant.accessHash ? accessEnded(grant.accessHash) : '',
    );
    if (issued !== 1) throw new InvalidGrantError('The grant was revoked.');
    // Each refresh keeps the client as long as this refresh token: a client outlives its grants by no more.
    await this.store.holdClient(grant.clientId, grant.id, refreshTtlS);
    const scope = scopeOfLevel(narrowerLevel(grant.level ?? roleLevel(member.role), roleLevel(member.role)));
    return { access_token: access, token_type: 'Bearer', expires_in: accessTtlS, refresh_token: refresh, scope };
  }
}
