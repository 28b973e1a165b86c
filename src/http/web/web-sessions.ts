import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from '../../redis/keys.ts';

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
 * Sessions in Redis under the sha256 of their id (a copy of Redis holds no usable cookie),
 * with a sliding TTL, so API and web processes on different hosts share them.
 */
export class WebSessions {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {}

  /** Starts a session; the id goes into the cookie, the session stays here. */
  async create(s: Omit<WebSession, 'csrf' | 'createdAt'>): Promise<{ id: string; session: WebSession }> {
    const id = randomBytes(32).toString('base64url');
    const session: WebSession = { ...s, csrf: randomBytes(32).toString('base64url'), createdAt: Date.now() };
    await this.redis.set(this.keys.webSession(hashed(id)), JSON.stringify(session), 'EX', this.ttlS);
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
    if (id) await this.redis.del(this.keys.webSession(hashed(id)));
  }
}
