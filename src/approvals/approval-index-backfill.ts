import type { Keys } from '../redis/keys.ts';
import type { ScriptedRedis } from '../redis/lua-scripts.ts';
import { readFacets } from './approval-facets-read.ts';

/**
 * Puts every approval in the service-wide indexes into its workspace's pending or decided index
 * (see `ApprovalStore.page`), `batch` entries a step: ZSCAN, so entries the prune removes
 * meanwhile make it skip none. Idempotent; sets `keys.approvalsIndexed` when done.
 */
export async function backfillWorkspaceIndexes(redis: ScriptedRedis, keys: Keys, batch: number): Promise<void> {
  for (const source of [keys.approvalsAll, keys.approvalsPending]) {
    let cursor = '0';
    do {
      const [nextCursor, flat] = await redis.zscan(source, cursor, 'COUNT', batch);
      cursor = nextCursor;
      const ids = flat.filter((_, i) => i % 2 === 0);
      const rows = await readFacets(redis, keys, ids);
      const pipeline = redis.pipeline();
      rows.forEach((row, i) => {
        if (!row) return;
        if (row.state === 'pending') pipeline.zadd(keys.approvalsPendingOf(row.workspace), row.createdAt, ids[i]!);
        else pipeline.zadd(keys.approvalsDecidedOf(row.workspace), row.decidedAt ?? row.createdAt, ids[i]!);
      });
      if (pipeline.length) await pipeline.exec();
    } while (cursor !== '0');
  }
  await redis.set(keys.approvalsIndexed, String(Date.now()));
}
