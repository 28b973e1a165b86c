import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { publishedShardCount } from '../redis/service-shard-count.ts';

/** What a client assumes when neither its options nor Redis name the count (no worker ever started under the prefix). */
export const DEFAULT_SHARD_COUNT = 16;

/** The shard count a client uses, or why it must not send anything: its option and the service's count differ. */
export type ShardCountAnswer = { ok: true; count: number } | { ok: false; detail: string };

/**
 * A client's shard count: the `shardCount` it was given, checked against the one the service's
 * workers publish (`publishShardCount`), or, not given one, the published one. Read lazily, on
 * the first call that needs it, and kept once found; while none is published the client uses
 * {@link DEFAULT_SHARD_COUNT} (or its own) and asks again next time, so a worker started after
 * the client is followed.
 */
export class ClientShardCount {
  private published?: Promise<number | undefined>;
  private found?: number;
  /** The published count of the current reading, once it answered (see {@link known}). */
  private kept?: number;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly given: number | undefined,
  ) {}

  /**
   * The count as last resolved, for the parts of the client that need one at once (a lookup's
   * list of queues): the given one, else the published one once read, else the default.
   */
  get current(): number {
    return this.given ?? this.found ?? DEFAULT_SHARD_COUNT;
  }

  /**
   * {@link resolve}'s answer when it needs no await: the published count already read and kept
   * (it is, until {@link forget}). Undefined: call {@link resolve}.
   */
  known(): ShardCountAnswer | undefined {
    return this.kept === undefined ? undefined : this.answer(this.kept);
  }

  /** The count to use now, reading the published one the first time. Rejects when Redis does not answer. */
  async resolve(): Promise<ShardCountAnswer> {
    const reading = (this.published ??= publishedShardCount(this.redis, this.keys));
    const published = await reading.catch((err: unknown) => {
      if (this.published === reading) this.published = undefined;
      throw err;
    });
    // Not published yet: asked again by the next call, not kept as "none".
    if (published === undefined) {
      if (this.published === reading) this.published = undefined;
    } else {
      this.found = published;
      // Kept for known() only while this reading is the current one (not forgotten meanwhile).
      if (this.published === reading) this.kept = published;
    }
    return this.answer(published);
  }

  private answer(published: number | undefined): ShardCountAnswer {
    if (published !== undefined && this.given !== undefined && published !== this.given) {
      return {
        ok: false,
        // The registry's message says nothing was sent and its hint what to do: the counts only.
        detail: `The service runs ${published} shards (SHARD_COUNT); this client was given shardCount ${this.given}`,
      };
    }
    return { ok: true, count: this.current };
  }

  /**
   * Forgets the published count, so the next call reads it again: after a call no worker took,
   * which a service restarted with another SHARD_COUNT would explain.
   */
  forget(): void {
    this.published = undefined;
    this.kept = undefined;
  }
}
