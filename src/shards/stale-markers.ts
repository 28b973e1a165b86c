import type { Redis } from 'ioredis';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';

/** The BullMQ keys of a shard's queue the marker's check reads. */
export interface MarkerKeys {
  marker: string;
  wait: string;
  prioritized: string;
  delayed: string;
}

/**
 * Clears the wake-up BullMQ leaves behind when its worker takes a job, when the job is the only
 * one its shard's worker has in hand and no other waits (issue 31). BullMQ's `moveToActive`
 * marks the queue as having work each time it hands a job over; nothing waits then in the
 * sequential case, so once the job finished the worker's blocking fetch returned at once, asked
 * for a job that was not there and blocked again: one BZPOPMIN and one `moveToActive` per call
 * for nothing, most of what a read cost our worker beyond raw BullMQ's. The check and the
 * removal are one script (`clear-stale-marker.lua`), so a job added meanwhile keeps its marker.
 * Only with one job in hand: with more, the worker's fetch loop is busy anyway and a marker
 * usually stands for a job that does wait.
 */
export class StaleMarkers {
  private readonly redis: ScriptedRedis;
  private readonly connection: Redis;
  private readonly inHand = new Map<number, number>();

  constructor(redis: Redis) {
    this.connection = redis;
    this.redis = withScripts(redis);
  }

  /**
   * Runs `work`, a job of `shard`'s worker; the first job in hand sends the check, not awaited,
   * unless `checked`: the fetch that took the job saw to the marker itself (`ShardWorker`).
   */
  around<T>(shard: number, keys: MarkerKeys, checked: boolean, work: () => Promise<T>): Promise<T> {
    const n = this.enter(shard);
    let done: Promise<T>;
    try {
      // Its synchronous part first: a call's statement is written to its child before the
      // check is written to Redis, which is then sent while the child runs, off the call's path.
      done = work();
    } catch (err) {
      done = Promise.reject(err);
    }
    this.started(keys, n, checked);
    return done.finally(() => this.leave(shard));
  }

  /**
   * A job of `shard`'s worker is in hand: how many are now (see {@link started}). Each is given
   * back by {@link leave} once it ends. {@link around}'s steps, for a caller that joins them
   * with its own in one step (the shard worker's processor, issue 31).
   */
  enter(shard: number): number {
    const n = (this.inHand.get(shard) ?? 0) + 1;
    this.inHand.set(shard, n);
    return n;
  }

  /**
   * The job {@link enter} counted as the `n`th in hand has started its synchronous part: the
   * first sends the check, unless `checked`.
   */
  started(keys: MarkerKeys, n: number, checked: boolean): void {
    if (n !== 1 || checked) return;
    // Held until this turn's work is done: BullMQ's fetch loop asks for its next job in the
    // same turn (on this connection), and both leave in one write, one system call and one
    // wake-up of Redis fewer per call (issue 31). The check still precedes that fetch, and
    // so the blocking one that follows it.
    const socket = this.connection.status === 'ready' ? this.connection.stream : undefined;
    if (socket) {
      socket.cork();
      process.nextTick(() => socket.uncork());
    }
    // A failure leaves the marker, which costs only the fetch it always cost.
    this.redis.agentdbClearStaleMarker(keys.marker, keys.wait, keys.prioritized, keys.delayed).catch(() => undefined);
  }

  /** A job {@link enter} counted has ended. */
  leave(shard: number): void {
    const left = this.inHand.get(shard)! - 1;
    if (left === 0) this.inHand.delete(shard);
    else this.inHand.set(shard, left);
  }
}
