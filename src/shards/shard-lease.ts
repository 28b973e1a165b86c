import { readlinkSync } from 'node:fs';
import os from 'node:os';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';

/**
 * The lease by which exactly one worker process owns a shard (and so opens its files). It
 * lives `ttlMs` in Redis unless renewed; a dead owner's shards are taken over once it lapses.
 */
export class ShardLease {
  private readonly redis: ScriptedRedis;

  constructor(
    redis: Redis,
    private readonly keys: Keys,
    /** Unique per worker process. */
    readonly token: string,
    private readonly ttlMs: number,
  ) {
    this.redis = withScripts(redis);
  }

  /**
   * Takes the shard if free, or extends it if already ours; also takes it from a holder that
   * was a process on this machine and is dead (see {@link deadHere}). True when we own it now.
   */
  async acquire(shard: number): Promise<boolean> {
    // Compare-and-set (lease-acquire.lua), so a worker that lost its lease to a takeover can
    // never renew over the new owner; not ours, it answers the holder's token.
    const won = await this.redis.agentdbLeaseAcquire(this.keys.lease(shard), this.token, String(this.ttlMs));
    if (won === 1) return true;
    if (typeof won !== 'string' || !deadHere(won, this.token)) return false;
    return (await this.redis.agentdbLeaseTakeFrom(this.keys.lease(shard), this.token, String(this.ttlMs), won)) === 1;
  }

  /** Gives the shard up at once so another worker need not wait for the lease to lapse. */
  async release(shard: number): Promise<void> {
    await this.redis.agentdbLeaseRelease(this.keys.lease(shard), this.token);
  }

  /** The token of the worker that owns the shard, if any. */
  async owner(shard: number): Promise<string | null> {
    return this.redis.get(this.keys.lease(shard));
  }
}

/**
 * A worker's lease token: `host:pid-namespace:pid:uuid`. The host and the pid namespace let a
 * process on the same machine tell whether the holder is still alive (see {@link deadHere}).
 */
export function leaseToken(uuid: string): string {
  return `${os.hostname()}:${pidNamespace()}:${process.pid}:${uuid}`;
}

/**
 * Whether `holder` was a worker in this process's own pid namespace on this host that is gone:
 * its pid no longer runs. A service
 * restarted after a kill then takes its shards back at once instead of after LEASE_TTL_MS,
 * and its calls in flight are answered seconds after it is back. A holder elsewhere (another
 * host or container, whose pids mean nothing here) is waited for as before.
 */
export function deadHere(holder: string, ours: string): boolean {
  const h = holder.split(':');
  const o = ours.split(':');
  if (h.length !== 4 || o.length !== 4 || h[0] !== o[0] || h[1] !== o[1] || !h[1]) return false;
  const pid = Number(h[2]);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  // Our own pid: another pool in this process (tests run several), alive.
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** This process's pid namespace (`pid:[4026531836]` on Linux), or '' where there is none to read. */
function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid').replace(/[^0-9]/g, '');
  } catch {
    return '';
  }
}
