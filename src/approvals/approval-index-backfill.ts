import type { Keys } from '../redis/keys.ts';
import type { ScriptedRedis } from '../redis/lua-scripts.ts';

/**
 * Puts every approval in the service-wide indexes into its workspace's: pending or decided (see
 * `ApprovalPages.page`), and its share of the index of all and of the pending one by expiry (see
 * `ApprovalPages.scan`), `batch` entries a step: ZSCAN, so entries the prune removes meanwhile
 * make it skip none. Each record is indexed by approval-index-backfill.lua as it stands when the
 * script runs, so one decided or pruned meanwhile is not listed where it no longer belongs.
 * Idempotent; sets `keys.approvalsIndexed` when done.
 */
export async function backfillWorkspaceIndexes(redis: ScriptedRedis, keys: Keys, batch: number): Promise<void> {
  for (const source of [keys.approvalsAll, keys.approvalsPending]) {
    let cursor = '0';
    do {
      const [nextCursor, flat] = await redis.zscan(source, cursor, 'COUNT', batch);
      cursor = nextCursor;
      const ids = flat.filter((_, i) => i % 2 === 0);
      if (!ids.length) continue;
      // An approval's workspace never changes: read here, it names the keys the script writes.
      const read = redis.pipeline();
      for (const id of ids) read.hget(keys.approval(id), 'workspace');
      const workspaces = ((await read.exec()) ?? []).map(([, ws]) => ws as string | null);
      // Sent together, without waiting on each: one connection writes them back to back.
      await Promise.all(
        ids.map((id, i) => {
          const ws = workspaces[i];
          if (!ws) return 0;
          return redis.agentdbApprovalIndexBackfill(
            keys.approval(id),
            keys.approvalsAll,
            keys.approvalsPendingOf(ws),
            keys.approvalsDecidedOf(ws),
            keys.approvalsAllOf(ws),
            keys.approvalsExpiringOf(ws),
            id,
          );
        }),
      );
    } while (cursor !== '0');
  }
  await redis.set(keys.approvalsIndexed, String(Date.now()));
}
