import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { errorEnvelope, type ErrorEnvelope } from '../contracts/envelope.ts';
import { FIRST_ANSWER_MS, redisAnswers, shownUrl } from '../redis/connection.ts';
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
  /** When Redis last sent anything on this connection (Date.now()): see {@link Unanswered}. */
  readonly replies = { at: 0 };

  constructor(
    private readonly redis: Redis,
    private readonly redisUrl: string,
  ) {
    this.outage = new RedisOutage(redis, redisUrl);
    // The next outage is asked about afresh: a verdict kept from the last one would answer a
    // call during a blip UNAVAILABLE at once, with a stale reason.
    this.redis.on('ready', () => (this.answering = undefined));
    // Each socket of the connection (a new one per reconnect) marks when Redis last sent on it.
    const counted = new WeakSet<object>();
    const count = () => {
      const stream = (this.redis as unknown as { stream?: NodeJS.ReadableStream }).stream;
      if (!stream || counted.has(stream)) return;
      counted.add(stream);
      stream.on('data', () => (this.replies.at = Date.now()));
    };
    this.redis.on('connect', count);
    count();
  }

  /**
   * A bound on a stretch of work on this connection (see {@link Unanswered}) that a Redis still
   * answering on it does not pass: only one that answers nothing at all for `ms` does.
   */
  unanswered(why: () => string, ms = REDIS_ANSWER_MS): Unanswered {
    return new Unanswered(ms, why, this.replies);
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

  /** The connection is up now: {@link redisDown} would answer undefined without waiting. */
  get up(): boolean {
    return isReady(this.redis);
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

/**
 * UNAVAILABLE for a call refused before it was sent: under a caller's own id it says the call
 * may still run (`mayStillRun: true`), since an earlier send of the id may have reached Redis and
 * run (review F4); under an id made for this call alone, nothing else can have run it.
 */
export function ownIdAnswer(env: ErrorEnvelope, ownId: boolean): ErrorEnvelope {
  return ownId ? { ...env, mayStillRun: true } : env;
}

/**
 * UNAVAILABLE for a call, or a look at one, that never got as far as its queue: Redis away while
 * the caller's key was looked up (`POST` and `GET /v1/calls`, `/mcp`'s `tools/call`). Nothing of
 * this send reached Redis, but under the caller's own id an earlier send may have, and run (review
 * F4), as `call` answers; a look at a call says it may still run, as `result` does in an outage.
 * A call without an id of its own is answered under one made for it, never an empty one.
 */
export function unsentUnavailable(callId: string | undefined, tool: string, why: string): ErrorEnvelope {
  return unavailable(callId ?? randomUUID(), tool, why, callId !== undefined);
}

function isReady(redis: Redis): boolean {
  return redis.status === 'ready';
}

/**
 * How long a call waits on a Redis that is connected but answers nothing (stopped with SIGSTOP, a
 * frozen VM) before answering UNAVAILABLE: its enqueue, or the look at its job once its timeoutMs
 * has passed. Such a connection never closes, so {@link RedisOutage} never hears of it, and
 * ioredis has no command timeout: a call made during a 20 s SIGSTOP was still unanswered at 20 s
 * (review R2). Twice {@link FIRST_ANSWER_MS}, so that a Redis that is down answers first, as it
 * did (mayStillRun false: nothing was sent).
 */
export const REDIS_ANSWER_MS = 2 * FIRST_ANSWER_MS;

/** How many bounds of {@link REDIS_ANSWER_MS} a wait on a busy Redis may take (a minute). */
export const MAX_BUSY_BOUNDS = 10;

/**
 * A bound on a stretch of work that waits on Redis: {@link passed} resolves with why, once
 * {@link arm}ed for `ms` without {@link disarm}; it never settles otherwise. With `replies` (when
 * Redis last sent anything on the connection the work waits on), it passes only once Redis has
 * sent nothing on it for `ms`: one still sending is busy, not stopped, and answers each command
 * in its turn. A burst of 4,000 calls from one client (~32 commands each) answered 3,142 of them
 * UNAVAILABLE "connected but did not answer" while Redis was answering all along (review R1); a
 * stopped Redis sends nothing, and passes the bound `ms` after the last thing it sent. At most
 * {@link MAX_BUSY_BOUNDS} bounds in all.
 */
export class Unanswered {
  readonly passed: Promise<string>;
  private settle!: (why: string) => void;
  private timer?: NodeJS.Timeout;
  private armedAt = 0;

  constructor(
    private readonly ms: number,
    /** Made only if the bound passes: a call's hot path builds no message it does not send. */
    private readonly why: () => string,
    private readonly replies?: { readonly at: number },
  ) {
    this.passed = new Promise((resolve) => (this.settle = resolve));
  }

  arm(): void {
    if (this.timer) return;
    this.armedAt = Date.now();
    this.timer = setTimeout(() => this.lapsed(), this.ms).unref();
  }

  /**
   * Passes once Redis has sent nothing for `ms`, counted from the last thing it sent, not from
   * the end of the window that saw it: sampled only at each window's end, a Redis stopped just
   * after sending passed the bound a whole window late (up to 2 x `ms` after the stop; review R2).
   */
  private lapsed(): void {
    const now = Date.now();
    const last = Math.max(this.armedAt, this.replies?.at ?? 0);
    const end = Math.min(last + this.ms, this.armedAt + MAX_BUSY_BOUNDS * this.ms);
    if (end > now) {
      this.timer = setTimeout(() => this.lapsed(), end - now).unref();
      return;
    }
    this.settle(this.why());
  }

  disarm(): void {
    clearTimeout(this.timer);
  }
}

/** Why a call's enqueue was given up: Redis is connected but answers nothing. */
export function enqueueUnanswered(redisUrl: string): string {
  return `Redis at ${shownUrl(redisUrl)} is connected but did not answer the call's enqueue within ${REDIS_ANSWER_MS / 1000} s. The call may still be queued when Redis answers again: send it again under the same call id for its outcome.`;
}

/** Why a look at a call's result was given up: Redis is connected but answers nothing. */
export function resultUnanswered(redisUrl: string, callId: string): string {
  return `Redis at ${shownUrl(redisUrl)} is connected but did not answer the look at call ${JSON.stringify(callId)} within ${REDIS_ANSWER_MS / 1000} s. The call may still be queued or running: ask for its result again once Redis answers.`;
}

/** Why a decision was given up: Redis is connected but answers nothing, perhaps after recording it. */
export function decideUnanswered(redisUrl: string, approvalId: string): string {
  return `Redis at ${shownUrl(redisUrl)} is connected but did not answer the decision on approval ${approvalId} within ${REDIS_ANSWER_MS / 1000} s: it may or may not have been recorded. Deciding again is safe once Redis answers: an approval is decided once, so a second decision records it if the first was not, or answers APPROVAL_CONFLICT naming the one recorded.`;
}
