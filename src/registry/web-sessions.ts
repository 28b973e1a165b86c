import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';

/**
 * A signed-in browser. It holds the sha256 of the member's key, never the key, and who it
 * belonged to when signing in: every request asks the members registry again with the hash,
 * so a revoked key (or one re-minted) signs its sessions out at once.
 */
export interface WebSession {
  keyHash: string;
  workspace: string;
  name: string;
  /** The synchronizer token every state change must carry. */
  csrf: string;
  createdAt: number;
}

const hashed = (id: string) => createHash('sha256').update(id).digest('hex');

/**
 * The most sessions one member keeps at once; signing in again past it ends the oldest. Without
 * a bound a member key could fill Redis for every tenant: the hostile review signed in 379 times
 * a second from one client, 420 bytes of Redis each for WEB_SESSION_TTL_S (8 h: about 4.6 GB),
 * counted in no workspace's budget.
 */
export const MAX_SESSIONS_PER_MEMBER = 20;

/**
 * Sessions in Redis under the sha256 of their id (a copy of Redis holds no usable cookie),
 * with a sliding TTL, so API and web processes on different hosts share them.
 */
export class WebSessions {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {}

  /**
   * Starts a session; the id goes into the cookie, the session stays here. A member's sessions
   * past {@link MAX_SESSIONS_PER_MEMBER} end, oldest first.
   */
  async create(s: Omit<WebSession, 'csrf' | 'createdAt'>): Promise<{ id: string; session: WebSession }> {
    const id = randomBytes(32).toString('base64url');
    const session: WebSession = { ...s, csrf: randomBytes(32).toString('base64url'), createdAt: Date.now() };
    const idHash = hashed(id);
    const index = this.keys.webMemberSessions(s.workspace, s.name);
    // The index lives as long as its newest session could without a request; a session kept
    // alive past it by its requests is no longer counted, but it was counted when it began.
    const res = await this.redis
      .multi()
      .set(this.keys.webSession(idHash), JSON.stringify(session), 'EX', this.ttlS)
      .zadd(index, session.createdAt, idHash)
      .expire(index, this.ttlS)
      .zrange(index, 0, -(MAX_SESSIONS_PER_MEMBER + 1))
      .zremrangebyrank(index, 0, -(MAX_SESSIONS_PER_MEMBER + 1))
      .exec();
    const ended = (res?.[3]?.[1] as string[] | undefined) ?? [];
    if (ended.length > 0) await this.redis.del(...ended.map((h) => this.keys.webSession(h)));
    return { id, session };
  }

  /** The session of a cookie's id, its TTL renewed; undefined when unknown or lapsed. */
  async get(id: string | undefined): Promise<WebSession | undefined> {
    if (!id || id.length > 100) return undefined;
    const key = this.keys.webSession(hashed(id));
    const raw = await this.redis.getex(key, 'EX', this.ttlS);
    return raw ? (JSON.parse(raw) as WebSession) : undefined;
  }

  /** Ends a session (sign-out, or its member is gone). */
  async destroy(id: string | undefined): Promise<void> {
    if (!id) return;
    const key = this.keys.webSession(hashed(id));
    const raw = await this.redis.get(key);
    const s = raw ? (JSON.parse(raw) as WebSession) : undefined;
    const tx = this.redis.multi().del(key);
    if (s) tx.zrem(this.keys.webMemberSessions(s.workspace, s.name), hashed(id));
    await tx.exec();
  }
}
