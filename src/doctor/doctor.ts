import type { Config } from '../config.ts';
import { openBlobStore } from '../blobs/blob-stores.ts';
import { connectAnswering } from '../redis/connection.ts';
import { blobStoreCheck } from './blob-store-check.ts';
import type { CheckResult } from './check.ts';
import { dataFolderCheck, diskCheck, nodeCheck } from './host-checks.ts';
import { redisChecks, redisUnreachable } from './redis-checks.ts';
import { shardOwnerCheck } from './shard-owner-check.ts';

export type { CheckResult, CheckStatus } from './check.ts';

/**
 * Every check of `agentdb doctor`, in the order it prints them: what agentdb needs of its
 * Redis, its data folder and disk, its blob store, Node and the clock; with START_WORKERS=off,
 * whether workers own every shard. A Redis that does not
 * answer fails its checks and the others still run. `dev`: a development machine, whose Redis
 * may lose everything (no persistence is a warning, not a failure).
 */
export async function runDoctor(config: Config, opts: { dev?: boolean } = {}): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  try {
    const redis = await connectAnswering(config.redisUrl, { name: 'agentdb-doctor' });
    try {
      out.push(...(await redisChecks(redis, opts)));
      if (!config.startWorkers) out.push(await shardOwnerCheck(redis, config));
    } finally {
      redis.disconnect();
    }
  } catch (err) {
    const { code, detail } = err as { code?: string; detail?: string };
    out.push(...redisUnreachable(detail ?? (err as Error).message, code === 'REDIS_REFUSES_WRITES'));
  }
  out.push(dataFolderCheck(config.dataDir), diskCheck(config.dataDir));
  const store = openBlobStore(config);
  try {
    out.push(await blobStoreCheck(store, config.blob.kind === 's3'));
  } finally {
    await store.close().catch(() => undefined);
  }
  out.push(nodeCheck());
  return out;
}
