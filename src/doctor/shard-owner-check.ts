import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import { keysFor } from '../redis/keys.ts';
import { shardsWithoutLease } from '../shards/unowned-shards.ts';
import { result, type CheckResult } from './check.ts';

/**
 * For an HTTP-only `agentdb start` (START_WORKERS=off): whether `agentdb worker` processes own
 * every shard now. Without one, calls to a shard nobody owns wait until a worker takes it (and
 * `/ready` answers 503), so a missing worker is a warning; a process that starts its own
 * workers needs no check, as it takes every free shard when it starts.
 */
export async function shardOwnerCheck(redis: Redis, config: Config): Promise<CheckResult> {
  const shards = Array.from({ length: config.shardCount }, (_, i) => i);
  const missing = await shardsWithoutLease(redis, keysFor(config.prefix), shards);
  if (missing.length === 0) return result('shard-owners', 'ok', `START_WORKERS=off: every shard (${config.shardCount}) has an agentdb worker owning it.`);
  return result(
    'shard-owners',
    'warn',
    `START_WORKERS=off (HTTP only) and no agentdb worker owns shard${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of ${config.shardCount}: calls to ${missing.length > 1 ? 'them' : 'it'} wait until one does, and /ready answers 503.`,
    'Start `agentdb worker` beside the HTTP process with the same REDIS_URL, AGENTDB_PREFIX and SHARD_COUNT (docker-compose.yml shows one), or set START_WORKERS=on.',
  );
}
