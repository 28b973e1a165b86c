import type { Redis } from 'ioredis';
import { ApprovalStore } from '../approvals/approval-store.ts';
import { summary } from '../approvals/approval-summary.ts';
import { callKey } from '../contracts/call-identity.ts';
import { connectRedis } from '../redis/connection.ts';
import { EventReader, latestEventId } from '../redis/events.ts';
import type { Keys } from '../redis/keys.ts';
import type { CallLookup } from './call-lookup.ts';
import type { CallWaiters } from './call-waiters.ts';

/**
 * A reader parked this long or less reads on from where it stopped when a call is waited on
 * again; one parked longer starts from the newest event. A second: a client calling at least
 * that often never pays the round trip, and what it reads through is a second of the service's
 * completions at most.
 */
const CATCH_UP_MS = 1000;

/**
 * How a client hears that the calls it waits on ended: one event reader for all of them,
 * started by the first wait (and again by the next after a start that failed), and, when the
 * client's connection comes back after a drop, a look at every waited call's job.
 */
export class ClientCallEvents {
  private reader?: Promise<EventReader>;
  /** The reader once {@link ensure} has started it: a warm call need not await it. */
  private started?: EventReader;
  /** Reads an approval whose event carried its effect by reference: made on first use. */
  private approvals?: ApprovalStore;
  /** A parked reader's wake from the newest event, under way (see {@link wake}). */
  private waking?: Promise<EventReader>;

  constructor(
    private readonly redis: Redis,
    private readonly redisUrl: string,
    private readonly keys: Keys,
    private readonly waiters: CallWaiters,
    private readonly lookup: CallLookup,
  ) {
    // Back after a drop: every waited call's job is looked at now, so one that Redis lost while
    // down (it came back empty) answers at once, not at its next look, `timeoutMs` later.
    let dropped = false;
    this.redis.on('close', () => {
      dropped = true;
    });
    this.redis.on('ready', () => {
      if (!dropped) return;
      dropped = false;
      this.waiters.lookNow();
    });
  }

  ensure(): Promise<EventReader> {
    if (this.started) return this.wake(this.started) ?? Promise.resolve(this.started);
    this.reader ??= (async () => {
      // Start from the newest event that exists now, so no completion can slip between
      // enqueueing a call and the reader's first read.
      const from = await latestEventId(this.redis, this.keys.events);
      const conn = connectRedis(this.redisUrl, { blocking: true, name: 'agentdb-events' });
      // A completion of a call nobody here waits on (another client's) is skipped unparsed.
      const reader = new EventReader(
        conn,
        this.keys.events,
        from,
        (e) =>
          this.waiters.onEvent(
            e,
            (id) => this.lookup.finished(id),
            async (id) => {
              const approval = await (this.approvals ??= new ApprovalStore(this.redis, this.keys)).get(id);
              return approval && summary(approval);
            },
          ),
        (c) => this.waiters.awaitsCompletion(callKey(c.workspace, c.agent, c.callId, c.memberSince)),
        () => this.waiters.idle(),
      );
      // A wait set by a path that did not come through here first still wakes it, from where it stopped.
      this.waiters.onBusy = () => reader.resume();
      reader.start();
      this.started = reader;
      return reader;
    })();
    // A reader that could not start (Redis down) is tried again by the next call.
    this.reader.catch(() => (this.reader = undefined));
    return this.reader;
  }

  /** Undefined once the events reader is reading (nothing to wait for); else {@link ensure}'s start or wake. */
  starting(): Promise<EventReader> | undefined {
    return this.started ? this.wake(this.started) : this.ensure();
  }

  /**
   * Wakes a reader parked while nobody here waited (`EventReader`'s `idle`): after a short rest
   * at once, from where it stopped (what it skips is little); after a longer one from the newest
   * event, read first (a round trip, as a first start takes), so a client idle while the service
   * was busy does not read through everything it missed. Undefined when it was reading.
   */
  private wake(reader: EventReader): Promise<EventReader> | undefined {
    const since = reader.parkedSince();
    if (since === undefined) return undefined;
    if (Date.now() - since < CATCH_UP_MS) {
      reader.resume();
      return undefined;
    }
    // Redis not answering: read on from where it stopped, which misses nothing.
    this.waking ??= latestEventId(this.redis, this.keys.events)
      .then(
        (newest) => reader.resume(newest),
        () => reader.resume(),
      )
      .then(() => {
        this.waking = undefined;
        return reader;
      });
    return this.waking;
  }

  /** Stops the reader, if one started (the client is closing). */
  async stop(): Promise<void> {
    if (this.reader) await (await this.reader.catch(() => undefined))?.stop();
  }
}
