import type { Redis } from 'ioredis';
import { errorEnvelope, type ErrorEnvelope } from '../contracts/envelope.ts';
import { redisAnswers } from '../redis/connection.ts';
import { RedisOutage } from '../redis/redis-outage.ts';
import { WaitEnded } from './call-waiters.ts';

/**
 * The client's answers when Redis does not answer: every one of its calls races the outage, so a
 * runtime gets UNAVAILABLE in words within a few seconds instead of a driver error or a wait
 * without end.
 */
export class OutageAnswers {
  private readonly outage: RedisOutage;
  private answering?: Promise<void>;

  constructor(
    private readonly redis: Redis,
    private readonly redisUrl: string,
  ) {
    this.outage = new RedisOutage(redis, redisUrl);
    // The next outage is asked about afresh: a verdict kept from the last one would answer a
    // call during a blip UNAVAILABLE at once, with a stale reason.
    this.redis.on('ready', () => (this.answering = undefined));
  }

  /**
   * `work`'s answer, or `down`'s once Redis has gone for a few seconds (see {@link RedisOutage})
   * or `work` fails: a runtime awaiting a call without try/catch must get an answer it can
   * read, never a driver error (ioredis's `MaxRetriesPerRequestError` crashed one). Whatever
   * `work` does later is ignored. Only `signal` aborting rejects, at once, with its reason.
   */
  async answerOrUnavailable<T>(work: () => Promise<T>, down: (why: string) => T, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    let stop = (): void => {};
    const lost = new Promise<T>((resolve) => (stop = this.outage.onLost((why) => resolve(down(why)))));
    let unlisten = (): void => {};
    const aborted = new Promise<never>((_, reject) => {
      if (!signal) return;
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      unlisten = () => signal.removeEventListener('abort', onAbort);
    });
    try {
      return await Promise.race([work(), lost, aborted]);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof WaitEnded) return down(err.message);
      return down(`Redis did not answer: ${(err as Error).message}`);
    } finally {
      stop();
      unlisten();
    }
  }

  /**
   * Undefined when Redis answers; otherwise what is wrong, for an UNAVAILABLE answer. A
   * connection to a Redis that is down retries forever and BullMQ waits for it without a word,
   * so this is asked first. Until the connection is back, later callers get the same answer at
   * once instead of waiting again (a batch must not wait a few seconds per call).
   */
  async redisDown(): Promise<string | undefined> {
    if (this.redis.status === 'ready') return undefined;
    this.answering ??= redisAnswers(this.redis, this.redisUrl);
    try {
      await this.answering;
      return undefined;
    } catch (err) {
      return (err as { detail?: string }).detail ?? (err as Error).message;
    } finally {
      // Read again: the await above may have seen the connection come up.
      if (isReady(this.redis)) this.answering = undefined;
    }
  }

  /** Stops watching for outages (the client is closing). */
  stop(): void {
    this.outage.stop();
  }
}

/**
 * UNAVAILABLE, saying whether the call may still run: once it has been handed to Redis, a Redis
 * that returns with its data runs it, so the caller sends it again under the same call id
 * (which joins it, or runs it once) rather than under a new one.
 */
export function unavailable(callId: string, tool: string, why: string, mayStillRun: boolean): ErrorEnvelope {
  return { ...errorEnvelope(callId, tool, 'UNAVAILABLE', why), mayStillRun };
}

function isReady(redis: Redis): boolean {
  return redis.status === 'ready';
}
