import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { Metrics } from '../../src/metrics.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { BackupLog } from '../../src/shards/backup-log.ts';
import { addServiceGauges } from '../../src/shards/service-gauges.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Issue 27 part 6: /metrics showed Redis's memory in all, not who holds it. Each workspace's
// bytes as its Redis budget counts them, for the METRICS_TOP_WORKSPACES holding the most only,
// so the label's values stay bounded however many workspaces there are.
let sb: Sandbox;
let redis: ReturnType<typeof connectRedis>;
let metrics: Metrics;
let closeGauges: () => Promise<void>;

beforeAll(() => {
  sb = sandbox({ METRICS_TOP_WORKSPACES: '2' });
  redis = connectRedis(sb.config.redisUrl);
  metrics = new Metrics();
  const keys = keysFor(sb.config.prefix);
  closeGauges = addServiceGauges(metrics, { redis, keys, config: sb.config, backups: new BackupLog(redis, keys) });
});
afterAll(async () => {
  await closeGauges();
  redis.disconnect();
  await sb.cleanup();
});

const shown = async () =>
  Object.fromEntries([...(await metrics.text()).matchAll(/^agentdb_redis_workspace_bytes\{workspace="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));

describe('agentdb_redis_workspace_bytes', () => {
  it('shows the top METRICS_TOP_WORKSPACES workspaces by the bytes their budget counts, and drops one that holds nothing', async () => {
    const budget = new WorkspaceRedisBudget(redis, keysFor(sb.config.prefix));
    const until = Date.now() + 3600_000;
    const hold = (workspace: string, bytes: number) => budget.note(workspace, [{ callKey: `${workspace}.a.c1`, kind: 'call', bytes, until }]);
    await hold('small', 1000);
    await hold('big', 3000);
    await hold('middle', 2000);
    expect(await shown()).toEqual({ big: 3000, middle: 2000 });

    // Its call's bytes let go: `big` holds nothing and leaves the index; `small` takes its place.
    await budget.note('big', [], until + 1);
    expect(await shown()).toEqual({ middle: 2000, small: 1000 });

    // A ledger that Redis let go with its last entry (its keys expire with it) is dropped too.
    await redis.del(keysFor(sb.config.prefix).redisBudget('middle').held);
    expect(await shown()).toEqual({ small: 1000 });
    expect(await redis.zrange(keysFor(sb.config.prefix).redisBudgetIndex, 0, -1)).toEqual(['small']);
  });
});
