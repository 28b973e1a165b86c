import type { Redis } from 'ioredis';
import type { OffloadQuota, QuotaAnswer } from './offloaded-results.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';

/**
 * Bounds what a workspace's offloaded results hold in the blob store at once
 * (MAX_OFFLOADED_BYTES_PER_WORKSPACE): a ledger in Redis of each result kept and when it
 * expires. The hostile review filled a blob store at 64 MiB a call with one query repeated; the
 * store itself cannot say what a workspace holds without listing it.
 */
export class RedisOffloadQuota implements OffloadQuota {
  private readonly redis: ScriptedRedis;

  constructor(
    redis: Redis,
    private readonly keys: Keys,
    private readonly cap: number,
  ) {
    this.redis = withScripts(redis);
  }

  async reserve(workspace: string, id: string, bytes: number, expiresAt: number, now: number): Promise<QuotaAnswer> {
    // offload-reserve.lua: drops the expired, sums the rest and adds this one only within the cap,
    // in one step, so concurrent calls of a workspace cannot each see room for themselves.
    const [ok, held, first] = await this.redis.agentdbOffloadReserve(
      this.keys.offloaded(workspace),
      String(now),
      id,
      String(bytes),
      String(expiresAt),
      String(this.cap),
    );
    return ok === 1 ? { ok: true } : { ok: false, held: Number(held), cap: this.cap, ...(first ? { freesAt: Number(first) } : {}) };
  }

  /**
   * What `workspace`'s offloaded results hold now (bytes), as the ledger counts them: the disk
   * quota (WORKSPACE_MAX_BYTES) and `agentdb usage` add it to the workspace's files.
   */
  async held(workspace: string, now: number): Promise<number> {
    const members = await this.redis.zrangebyscore(this.keys.offloaded(workspace), `(${now}`, '+inf');
    return members.reduce((sum, m) => sum + Number(m.slice(m.lastIndexOf(':') + 1)), 0);
  }

  async release(workspace: string, id: string, bytes: number): Promise<void> {
    await this.redis.zrem(this.keys.offloaded(workspace), `${id}:${bytes}`);
  }
}
