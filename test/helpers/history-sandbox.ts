import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import type { ShardWorkerPoolOptions } from '../../src/shards/shard-worker-pool.ts';
import { REDIS_URL, sandbox, type Sandbox } from './harness.ts';

/** What {@link withHistorySandbox} makes: the sandbox, a client of it, and the operator's way to its history. */
export interface HistorySandbox {
  sb: Sandbox;
  client: AgentDbClient;
  ops: ShardOpClient;
  history: HistoryClient;
}

/**
 * A sandbox with every shard's worker started, a client, and the shard-op client and history
 * client an operator's restore and activity calls go through, for the tests of one file: made
 * before them (in the order of the file's own `beforeAll`s: call it first) and closed after;
 * `set` receives them once made. `env` is the sandbox's, `ops` the pool's shard-op handlers
 * (a worker of an older build), `admins` members `workspace/name` added as admins.
 */
export function withHistorySandbox(
  opts: { env?: Record<string, string>; ops?: ShardWorkerPoolOptions['ops']; admins?: string[] },
  set: (box: HistorySandbox) => void,
): void {
  let box: HistorySandbox | undefined;
  beforeAll(async () => {
    const sb = sandbox(opts.env);
    const ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
    box = { sb, client: sb.client(), ops, history: new HistoryClient(ops, sb.config.shardCount) };
    await sb.pool(undefined, {}, opts.ops ? { ops: opts.ops } : {});
    if (opts.admins?.length) {
      const redis = new Redis(REDIS_URL);
      try {
        const members = new MemberRegistry(redis, keysFor(sb.config.prefix));
        for (const m of opts.admins) {
          const [workspace, name] = m.split('/');
          await members.add(workspace!, name!, 'admin');
        }
      } finally {
        redis.disconnect();
      }
    }
    set(box);
  }, 120_000);
  afterAll(async () => {
    await box?.ops.close();
    await box?.sb.cleanup();
  });
}
