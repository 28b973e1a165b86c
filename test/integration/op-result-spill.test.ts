import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { OP_INLINE_BYTES } from '../../src/shards/op-result-spill.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// The hostile review: one member's 30 CSV exports on the web page (unmetered, 2 MiB chunks) left
// 587 MB in one shard queue's BullMQ event stream, which keeps its last ~1,000 events whatever
// their size, and every op job kept its result 5 minutes more; no workspace's budget counted
// either. A large op result now waits under a key of its own until its caller reads it, once.
const who = { workspace: 'evil', agent: 'mal', settings: { database: 'agent' as const } };
let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;
let redis: Redis;

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '1' });
  await sb.pool();
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await sb.cleanup();
});

/** The largest entry of shard 0's BullMQ event stream, in bytes of its fields. */
async function largestEvent(): Promise<number> {
  const keys = keysFor(sb.config.prefix);
  const entries = (await redis.xrange(`${keys.bullPrefix}:${keys.queueName(0)}:events`, '-', '+')) as [string, string[]][];
  return Math.max(0, ...entries.map(([, fields]) => fields.reduce((n, f) => n + Buffer.byteLength(f), 0)));
}

describe('a large shard-op result', () => {
  it('reaches its caller whole, and neither the event stream nor the job keeps it', async () => {
    const write = (sql: string) => client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql } });
    expect(await write('CREATE TABLE t (v TEXT)')).toMatchObject({ ok: true });
    expect(
      await write(
        "INSERT INTO t SELECT printf('%0500d', value) FROM json_each('[' || (SELECT group_concat(x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400) SELECT x FROM c)) || ']')",
      ),
    ).toMatchObject({
      ok: true,
      result: { changes: 400 },
    });
    const out = await ops.run(0, 'browse.csv', { table: 't' }, { db: 'evil/mal' });
    expect(out.ok).toBe(true);
    const chunk = (out as { result: { csv: string; rows: number } }).result;
    expect(chunk.rows).toBe(400);
    expect(chunk.csv.split('\n').filter(Boolean)).toHaveLength(401);
    expect(Buffer.byteLength(chunk.csv)).toBeGreaterThan(OP_INLINE_BYTES);
    expect(await largestEvent()).toBeLessThan(OP_INLINE_BYTES);
    // Read once: nothing of it is left under the shard's op-result keys.
    expect(await redis.keys(`${sb.config.prefix}:{shard-0}:op-result:*`)).toEqual([]);
  });
});
