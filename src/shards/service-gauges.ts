import fs from 'node:fs';
import type { Redis } from 'ioredis';
import { WorkspaceRedisBudget } from '../calls/workspace-redis-budget.ts';
import type { Config } from '../config.ts';
import type { Metrics } from '../metrics.ts';
import type { Keys } from '../redis/keys.ts';
import { ShardQueues } from '../redis/shard-queues.ts';
import type { BackupLog } from './backup-log.ts';

/** The states of a shard's queue `/metrics` shows (a parked call waits as a delayed job). */
const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized'] as const;

/**
 * Adds the service-wide gauges to `metrics`, each read from Redis or the disk at scrape time, so
 * any process serving `/metrics` shows the whole service, not only its own shards: each shard's
 * queue by state, pending approvals, each shard's last backup, Redis's memory (in all, and the
 * top workspaces') and the data folder's disk. @returns what closes the queues it opened.
 */
export function addServiceGauges(metrics: Metrics, deps: { redis: Redis; keys: Keys; config: Config; backups: BackupLog }): () => Promise<void> {
  const { redis, keys, config } = deps;
  const queues = new ShardQueues(redis, keys);
  const shards = Array.from({ length: config.shardCount }, (_, i) => i);

  metrics.gauge(
    'agentdb_queue_jobs',
    "Jobs in each shard's queue by state: waiting, active, delayed (parked calls waiting for a person, and calls put back behind their agent's share), prioritized.",
    ['shard', 'state'],
    async () =>
      (await Promise.all(shards.map(async (shard) => ({ shard, counts: await queues.of(shard).getJobCounts(...QUEUE_STATES) })))).flatMap(({ shard, counts }) =>
        QUEUE_STATES.map((state) => ({ labels: { shard, state }, value: counts[state] ?? 0 })),
      ),
  );
  metrics.gauge('agentdb_approvals_pending', 'Approvals waiting for a person, not yet expired.', [], async () => [
    { value: await redis.zcount(keys.approvalsPending, `(${Date.now()}`, '+inf') },
  ]);
  metrics.gauge(
    'agentdb_backup_last_success_timestamp_seconds',
    "When each shard's last backup run that failed nothing ended (unix seconds); absent for a shard never backed up.",
    ['shard'],
    async () => (await deps.backups.read(config.shardCount)).flatMap((s) => (s.lastOk ? [{ labels: { shard: s.shard }, value: s.lastOk.endedAt / 1000 }] : [])),
  );
  metrics.gauge(
    'agentdb_backup_last_run_failed',
    "1 when each shard's last backup run failed (the shard, or any of its databases), else 0.",
    ['shard'],
    async () =>
      (await deps.backups.read(config.shardCount)).flatMap((s) =>
        s.last ? [{ labels: { shard: s.shard }, value: s.last.error || s.last.failedDatabases > 0 ? 1 : 0 }] : [],
      ),
  );
  metrics.gauge('agentdb_redis_used_memory_bytes', "Redis's used_memory (INFO memory): every workspace's calls, approvals and events.", [], async () => {
    const m = /^used_memory:(\d+)/m.exec(await redis.info('memory'));
    return m ? [{ value: Number(m[1]) }] : [];
  });
  const budget = new WorkspaceRedisBudget(redis, keys);
  metrics.gauge(
    'agentdb_redis_workspace_bytes',
    'Redis bytes held by each of the METRICS_TOP_WORKSPACES workspaces holding the most, as their Redis budget counts them (calls kept, parked calls, approval records).',
    ['workspace'],
    async () => (await budget.top(config.metricsTopWorkspaces)).map((w) => ({ labels: { workspace: w.workspace }, value: w.bytes })),
  );
  metrics.gauge('agentdb_disk_bytes', "The data folder's disk (AGENTDB_DATA_DIR): size and free bytes.", ['kind'], () => {
    const st = fs.statfsSync(config.dataDir);
    return [
      { labels: { kind: 'size' }, value: st.blocks * st.bsize },
      { labels: { kind: 'free' }, value: st.bavail * st.bsize },
    ];
  });
  return () => queues.close();
}
