import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

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

/**
 * Makes sure a Redis answers at `url`. When none does and the URL is local, starts
 * `redis-server` from PATH with AOF persistence and its data under `dataDir/redis`, so a fresh
 * machine needs only `npm ci && npm start`. Returns the process it started, if any.
 * @throws Error saying how to get a Redis when none can be had.
 */
export async function ensureRedis(url: string, dataDir: string): Promise<ChildProcess | undefined> {
  if (await answers(url)) return undefined;
  const { hostname, port } = new URL(url);
  if (!LOCAL_HOSTS.has(hostname)) {
    throw new Error(`No Redis answers at ${url}. Start it, or point REDIS_URL at one that runs.`);
  }
  const dir = path.join(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  // A process group of its own: a terminal's Ctrl-C signals the whole foreground group, and in
  // ours Redis stopped at the same moment as agentdb, whose shutdown then ran against a Redis
  // already gone (exit 1, "Redis does not answer" as its last words). `start` stops it last.
  const child = spawn('redis-server', ['--port', port || '6379', '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', ''], {
    stdio: 'ignore',
    detached: true,
  });
  const failed = new Promise<never>((_, reject) =>
    child.once('error', () =>
      reject(
        new Error(
          `No Redis answers at ${url} and redis-server is not on PATH. Install it (apt-get install redis-server, ` +
            'brew install redis) or run `docker compose up`, or set REDIS_URL.',
        ),
      ),
    ),
  );
  for (let i = 0; i < 100; i++) {
    const up = await Promise.race([answers(url), failed]);
    if (up) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error(`Started redis-server for ${url}, but it did not answer within 10 s.`);
}
