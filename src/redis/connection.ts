import { Redis, type RedisOptions } from 'ioredis';
import { AgentDbError } from '../errors.ts';

/**
 * How long anything that starts waits for Redis's first answer before saying it does not
 * answer. A connection to a Redis that is down retries forever, and BullMQ waits for it to be
 * ready without a word: without this first check a CLI command hung, or failed 18 s later with
 * a stack trace.
 */
export const FIRST_ANSWER_MS = 3000;

/**
 * Opens a Redis connection. `blocking` connections (BullMQ workers, stream readers) must
 * retry forever instead of failing a command, as BullMQ requires.
 */
export function connectRedis(url: string, opts: { blocking?: boolean; name?: string } = {}): Redis {
  const options: RedisOptions = {
    connectionName: opts.name,
    maxRetriesPerRequest: opts.blocking ? null : 20,
    enableReadyCheck: true,
    // A host that drops packets is retried after this instead of ioredis's 10 s.
    connectTimeout: FIRST_ANSWER_MS,
    // `disconnect()` ends the last socket and waits this long for it to close before destroying
    // it, on a timer that only the socket's 'close' clears. A socket Redis already dropped (an
    // outage: between reconnect attempts) closed long before, so the timer ran its whole 2 s
    // default and held a CLI process open: `agentdb history` printed UNAVAILABLE at ~3 s and
    // exited at ~5 s (redis/ioredis#1247). `disconnect()` drops pending replies by contract,
    // and a wanted close goes through `quit()`, so nothing waits for that grace.
    disconnectTimeout: 0,
    // ioredis's default waits up to 2 s between attempts, so for up to 2 s after Redis came back
    // a connection that had not yet tried again answered UNAVAILABLE (seen in the redis-fault
    // test). Half a second apart costs a Redis that is down two connects a second per connection.
    retryStrategy: reconnectDelayMs,
  };
  const redis = new Redis(url, options);
  // Connection errors also fail the commands that wait on them, which is where callers see
  // and handle them; without a listener ioredis would print each reconnect attempt.
  redis.on('error', () => undefined);
  return redis;
}

/** How long a dropped connection waits before its `attempt`-th try to connect again (from 1). */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(attempt * 50, RECONNECT_MAX_MS);
}

/** The longest wait between two tries to reconnect: how long a client can lag a Redis that is back. */
export const RECONNECT_MAX_MS = 500;

/**
 * Resolves once `redis` answers a PING; rejects as soon as connecting fails (a refused
 * connection, a wrong password) or after `deadlineMs` without an answer.
 * @throws AgentDbError UNAVAILABLE saying that Redis at the URL (its password hidden) does not answer, and why;
 * REDIS_REFUSES_WRITES when it answers `MISCONF` (see {@link refusesWrites}).
 */
export async function redisAnswers(redis: Redis, url: string, deadlineMs = FIRST_ANSWER_MS): Promise<void> {
  if (redis.status === 'ready') return;
  let timer: NodeJS.Timeout | undefined;
  let onError: ((err: Error) => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = (why: string) =>
        reject(new AgentDbError('UNAVAILABLE', `Redis at ${shownUrl(url)} does not answer (${why}). Start it, or point REDIS_URL at one that runs.`));
      timer = setTimeout(() => fail(`no answer within ${deadlineMs / 1000} s`), deadlineMs);
      onError = (err) => fail(err.message);
      redis.once('error', onError);
      redis.ping().then(
        () => resolve(),
        (err: Error) => (refusesWrites(err) ? reject(writesRefused(url, err.message)) : fail(err.message)),
      );
    });
  } finally {
    clearTimeout(timer);
    if (onError) redis.off('error', onError);
  }
}

/**
 * Whether `err` is Redis refusing a command because it could not write to its own disk: an AOF
 * write or an RDB snapshot failed (its disk full, a folder gone), and until one works again it
 * answers every write, PING included, `MISCONF …`. It answers; it is not down (session 29, F5:
 * the CLI said "does not answer").
 */
export function refusesWrites(err: unknown): boolean {
  const message = (err as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' && message.startsWith('MISCONF');
}

/** REDIS_REFUSES_WRITES for a `MISCONF` reply (`why`) of Redis at `url`, in words an operator acts on. */
export function writesRefused(url: string, why: string): AgentDbError {
  return new AgentDbError(
    'REDIS_REFUSES_WRITES',
    `Redis at ${shownUrl(url)} answers, but refuses writes: it could not write to its own disk (${why}). Free space on the disk of Redis's folder (its AOF and RDB files), or fix what Redis's log names; it takes writes again by itself once a write to its disk works. Nothing was changed.`,
  );
}

/**
 * {@link connectRedis}, answering only once Redis does.
 * @throws AgentDbError UNAVAILABLE when it does not answer (see {@link redisAnswers}).
 */
export async function connectAnswering(url: string, opts: { blocking?: boolean; name?: string } = {}): Promise<Redis> {
  const redis = connectRedis(url, opts);
  try {
    await redisAnswers(redis, url);
    return redis;
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}

/**
 * Checks that a Redis answers at `url`, for a process about to hand the URL to BullMQ.
 * @throws AgentDbError UNAVAILABLE when it does not.
 */
export async function checkRedis(url: string): Promise<void> {
  (await connectAnswering(url, { name: 'agentdb-check' })).disconnect();
}

/**
 * Whether `err` is a Redis command that failed because its connection did (ioredis gave up
 * reconnecting for it, or the connection closed under it), as against a reply Redis gave.
 */
export function isConnectionFault(err: unknown): boolean {
  const e = err as { name?: unknown; message?: unknown; code?: unknown } | undefined;
  if (e?.name === 'MaxRetriesPerRequestError') return true;
  // EHOSTUNREACH, ENOTFOUND, EAI_AGAIN: a Redis host that is gone (a stopped compose service's
  // name no longer resolves) is as much away as one that refuses.
  if (typeof e?.code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN)$/.test(e.code)) return true;
  return typeof e?.message === 'string' && /^Connection is closed\.?$|Stream isn't writeable/.test(e.message);
}

/** The URL with its password, if any, replaced: it goes into messages and logs. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    // ioredis also takes options from the query (`?password=…` authenticates like the userinfo).
    for (const key of [...u.searchParams.keys()]) if (/pass|secret|token/i.test(key)) u.searchParams.set(key, '***');
    return u.toString().replace(/\/$/, '');
  } catch {
    // Unparseable: nothing in it can be told apart from a password.
    return '(an unparseable URL)';
  }
}

/** The URL a connection was made to, as an outage message names it (no password). */
function urlOf(redis: Redis): string {
  const { host, port, db } = redis.options;
  return `redis://${host ?? '127.0.0.1'}:${port ?? 6379}${db ? `/${db}` : ''}`;
}

/**
 * `work` (a lookup of a few commands), or UNAVAILABLE in words within about
 * {@link FIRST_ANSWER_MS} when Redis does not answer: checked first, and raced against the
 * connection dropping under it (a blip {@link redisAnswers} survives leaves `work` to finish).
 * Without it a lookup waits out ioredis's 20 retries per command (10 s and more) and ends in its
 * driver error.
 * @throws AgentDbError UNAVAILABLE
 */
export async function whileRedisAnswers<T>(redis: Redis, work: () => Promise<T>): Promise<T> {
  const url = urlOf(redis);
  if (redis.status !== 'ready') await redisAnswers(redis, url);
  let off = (): void => {};
  const lost = new Promise<never>((_, reject) => {
    const onClose = (): void => {
      redisAnswers(redis, url).catch(reject);
    };
    redis.once('close', onClose);
    off = () => redis.off('close', onClose);
  });
  const doing = work();
  // Whichever loses the race is not waited for; its failure is not an unhandled rejection.
  doing.catch(() => undefined);
  lost.catch(() => undefined);
  try {
    return await Promise.race([doing, lost]);
  } finally {
    off();
  }
}
