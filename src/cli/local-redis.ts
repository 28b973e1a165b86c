import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);
/** In the data folder: it has run on a Redis agentdb did not start (its URL inside). */
export const EXTERNAL_REDIS_MARKER = 'redis-external';

async function answers(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/** The flags `ensureRedis` starts `redis-server` with, the ones a person restarting it by hand needs too. */
function localRedisArgs(url: string, dataDir: string): string[] {
  return ['--port', new URL(url).port || '6379', '--bind', '127.0.0.1', '--dir', path.join(dataDir, 'redis'), '--appendonly', 'yes', '--save', ''];
}

/**
 * Logs, as an error, the redis-server `ensureRedis` started exiting while `agentdb start` still
 * runs (not stopped by it: `stopping()` false): nothing starts it again, and all the log said
 * was "Redis does not answer; retrying until it does", a wait with no end (review N10). The line
 * says what to do: restart `agentdb start`, or start that Redis by hand with the same flags.
 */
export function watchLocalRedis(child: ChildProcess, url: string, dataDir: string, logger: Logger, stopping: () => boolean): void {
  child.once('exit', (code, signal) => {
    if (stopping()) return;
    const how = signal ? `killed by ${signal}` : `exit code ${code}`;
    const by = `redis-server ${localRedisArgs(url, dataDir)
      .map((a) => (a === '' || /\s/.test(a) ? `'${a}'` : a))
      .join(' ')}`;
    logger.error(
      { redisPid: child.pid, code, signal },
      `the redis-server agentdb start started has stopped (${how}) and nothing starts it again: calls answer UNAVAILABLE until a Redis answers at ${url}. Restart agentdb start (it starts a new one on the same AOF files), or start it yourself: ${by}`,
    );
  });
}

/**
 * Makes sure a Redis answers at `url`. When none does and the URL is local, starts
 * `redis-server` from PATH with AOF persistence and its data under `dataDir/redis`, so a fresh
 * machine needs only `npm ci && npm start`; but not for a data folder that has run on a Redis
 * agentdb did not start ({@link EXTERNAL_REDIS_MARKER}). Returns the process it started, if any.
 * @param abort Aborted when the process is told to stop: a redis-server started here and not yet
 * handed over is stopped, and it throws.
 * @throws Error saying how to get a Redis when none can be had.
 */
export async function ensureRedis(url: string, dataDir: string, abort?: AbortSignal): Promise<ChildProcess | undefined> {
  const dir = path.join(dataDir, 'redis');
  const marker = path.join(dataDir, EXTERNAL_REDIS_MARKER);
  if (await answers(url)) {
    // A Redis this data folder never had one of ours under: someone else runs it.
    if (!existsSync(dir) && !existsSync(marker)) {
      mkdirSync(dataDir, { recursive: true });
      writeFileSync(marker, `${url}\n`);
    }
    return undefined;
  }
  const { hostname } = new URL(url);
  if (!LOCAL_HOSTS.has(hostname)) {
    throw new Error(`No Redis answers at ${url}. Start it, or point REDIS_URL at one that runs.`);
  }
  // Started here, on a port another Redis serves when it runs, ours took the port while that one
  // was down (restarting, or started after us at boot): it could not bind when it came back, and
  // the service ran on an empty or old Redis, without its registry, call ids and approvals
  // (session 35, F14's fault ledger). So only a data folder that never ran on someone else's.
  if (existsSync(marker) && !existsSync(dir)) {
    throw new Error(
      `No Redis answers at ${url}, and this data folder has run on a Redis agentdb did not start: start that one (agentdb will not start a Redis of its own in its place, on its port). ` +
        `To have agentdb run its own Redis from now on, delete ${marker}.`,
    );
  }
  mkdirSync(dir, { recursive: true });
  // A process group of its own: a terminal's Ctrl-C signals the whole foreground group, and in
  // ours Redis stopped at the same moment as agentdb, whose shutdown then ran against a Redis
  // already gone (exit 1, "Redis does not answer" as its last words). `start` stops it last.
  const child = spawn('redis-server', localRedisArgs(url, dataDir), {
    stdio: 'ignore',
    detached: true,
  });
  const failed = new Promise<never>((_, reject) =>
    child.once('error', () =>
      reject(
        new Error(
          // It said "or run `docker compose up`", which starts the app too, on the port this
          // process takes: the second to start exited on it (session 35, N11).
          `No Redis answers at ${url} and redis-server is not on PATH. Install it (apt-get install redis-server, ` +
            "brew install redis); or start docker-compose.yml's Redis alone, `docker compose up -d redis`, on " +
            '127.0.0.1:6379 (REDIS_URL=redis://127.0.0.1:6379); or set REDIS_URL to a Redis that runs. ' +
            '(`docker compose up` runs the whole service, the app too: then run no npm start.)',
        ),
      ),
    ),
  );
  for (let i = 0; i < 100; i++) {
    const up = await Promise.race([answers(url), failed]);
    // Stopped while it started: the redis-server goes too, answering or not.
    if (abort?.aborted) {
      child.kill();
      throw new Error(`Stopped while starting redis-server for ${url}.`);
    }
    if (up) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error(`Started redis-server for ${url}, but it did not answer within 10 s.`);
}
