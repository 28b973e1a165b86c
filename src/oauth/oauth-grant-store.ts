import type { Keys } from '../redis/keys.ts';
import type { ScriptedRedis } from '../redis/lua-scripts.ts';
import type { MemberRegistry } from '../registry/members.ts';
import { accessEnded } from './access-token-cache.ts';
import { CLIENT_UNUSED_TTL_S } from './oauth-clients.ts';
import type { CodeRecord, OAuthGrant } from './oauth-grant-records.ts';

/**
 * What a spent code or refresh token's record becomes, until its own TTL: presented again, it
 * shows the code or token was copied, and the grant is revoked (OAuth 2.1 §4.1.3, §4.3.1).
 */
const SPENT = 'spent:';

/**
 * A grant's record in Redis and how it ends: read, listed by member, revoked (one, a member's
 * all, or by a spent code or token shown again), and the hold it keeps on its client's record.
 * {@link OAuthGrants} issues codes and tokens; this is what they are checked against.
 */
export class OAuthGrantStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly keys: Keys,
    private readonly members: MemberRegistry,
  ) {}

  async grant(id: string): Promise<OAuthGrant | undefined> {
    const raw = await this.redis.get(this.keys.oauth('grant', id));
    return raw ? (JSON.parse(raw) as OAuthGrant) : undefined;
  }

  /**
   * A member's grants, newest first (the web page's Connected apps). Grants of an earlier member
   * of the same name (revoked, then added again) are not theirs: they are ended here.
   */
  async list(workspace: string, member: string): Promise<OAuthGrant[]> {
    const ids = await this.redis.zrevrange(this.keys.oauth('grants', `${workspace}/${member}`), 0, -1);
    const found = await Promise.all(ids.map((id) => this.grant(id)));
    const current = await this.members.get(workspace, member);
    const mine: OAuthGrant[] = [];
    for (const g of found) {
      if (!g || g.workspace !== workspace || g.member !== member) continue;
      if (current?.createdAt === g.memberSince) mine.push(g);
      else await this.revoke(workspace, member, g.id);
    }
    return mine;
  }

  /**
   * Ends every grant of `workspace`'s member `member` at once, tokens and refresh tokens alike:
   * what `members revoke` and removal from the workspace do.
   * @returns how many grants ended.
   */
  async revokeMember(workspace: string, member: string): Promise<number> {
    const index = this.keys.oauth('grants', `${workspace}/${member}`);
    const ids = await this.redis.zrange(index, 0, -1);
    let ended = 0;
    for (const id of ids) if (await this.revoke(workspace, member, id)) ended++;
    await this.redis.del(index);
    return ended;
  }

  /**
   * Revokes a member's grant: its access and refresh tokens stop working at the next request
   * (each is checked against the grant). Only the member's own grants.
   * @returns false when the member has no such grant.
   */
  async revoke(workspace: string, member: string, grantId: string): Promise<boolean> {
    const grant = await this.grant(grantId);
    await this.redis.zrem(this.keys.oauth('grants', `${workspace}/${member}`), grantId);
    if (!grant || grant.workspace !== workspace || grant.member !== member) return false;
    await this.dropGrant(grantId, grant.clientId);
    return true;
  }

  /**
   * Takes a code's or refresh token's record once: it is marked spent in the same command that
   * reads it, so two requests racing with one token cannot both have it. A spent one presented
   * again revokes its grant (the code or token was copied: whoever holds the grant's newer
   * tokens may be the thief), and reads as unknown.
   */
  async spend(key: string): Promise<string | undefined> {
    const raw = await this.redis.agentdbOauthSpend(key, SPENT);
    if (typeof raw !== 'string') return undefined;
    if (!raw.startsWith(SPENT)) return raw;
    const spentFor = raw.slice(SPENT.length);
    const grantId = spentFor.startsWith('{') ? (JSON.parse(spentFor) as CodeRecord).grantId : spentFor;
    const grant = await this.grant(grantId);
    if (grant) await this.revoke(grant.workspace, grant.member, grant.id);
    return undefined;
  }

  /**
   * The grant's record goes; tokens left behind find no grant and lapse by their own TTL. Its
   * client, held by no other live grant, goes back to an unconsented client's lifetime.
   */
  async dropGrant(id: string, clientId: string): Promise<void> {
    // With its access token and its codes' and refresh tokens' records, and announced: a server
    // that cached one of its tokens forgets it at once.
    await this.redis.agentdbOauthGrantDrop(
      this.keys.oauth('grant', id),
      this.keys.oauth('tokens', id),
      this.keys.oauth('access', ''),
      this.keys.registryChanges,
      // The change that ends its access token, split around the hash the script reads from the grant.
      ...(accessEnded('|').split('|') as [string, string]),
    );
    // Held by no grant now, the client counts among those nobody signs in through again (the cap).
    await this.redis.agentdbOauthClientRelease(
      this.keys.oauth('client', clientId),
      this.keys.oauth('holders', clientId),
      this.keys.oauth('clients', 'unconsented'),
      id,
      this.keys.oauth('grant', ''),
      String(CLIENT_UNUSED_TTL_S),
      clientId,
      String(Date.now()),
    );
  }

  /**
   * Seconds before refresh token `key`'s grant may be refreshed again: 0 unless `max` of its
   * records were issued within the last `lifeS` (an access token's life), and 0 for a token
   * unknown or spent (the refresh itself answers those).
   */
  async refreshWait(key: string, now: number, lifeS: number, max: number): Promise<number> {
    const grantId = await this.redis.get(key);
    if (!grantId || grantId.startsWith(SPENT)) return 0;
    const since = now - lifeS * 1000;
    const recent = await this.redis.zrevrangebyscore(this.keys.oauth('tokens', grantId), '+inf', `(${since}`, 'WITHSCORES', 'LIMIT', max - 1, 1);
    if (recent.length < 2) return 0;
    return Math.max(1, Math.ceil((Number(recent[1]) - since) / 1000));
  }

  /** Keeps `clientId`'s record (a registered client's) at least `ttlS` more, held by grant `id`. */
  async holdClient(clientId: string, id: string, ttlS: number): Promise<void> {
    const [client, holders] = [this.keys.oauth('client', clientId), this.keys.oauth('holders', clientId)];
    await this.redis.agentdbOauthClientHold(client, holders, this.keys.oauth('grant', id), id, String(ttlS));
  }
}
