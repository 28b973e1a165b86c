import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Review 19 (H27): an agent's runaway read with `as_of` of a moment not kept yet ran under the
// moment restore's 10-minute limit, not STATEMENT_TIMEOUT_MS: one call held an executor child
// for 10 minutes, again for each fresh moment (one write makes one). Through the client, the
// queue and a shard worker, as an agent sends it.
const TIMEOUT_MS = 1500;
const who = { workspace: 'evil', agent: 'a', settings: { database: 'agent' as const } };
let sb: Sandbox;
let client: AgentDbClient;
let workers: ShardWorkerPool;

beforeAll(async () => {
  sb = sandbox({ HISTORY_CAPTURE: 'on', STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS) });
  const shards = Array.from({ length: sb.config.shardCount }, (_, i) => i);
  workers = new ShardWorkerPool({ config: sb.config, shards, logger: pino({ level: 'silent' }), executorChild: builtExecutorChild });
  await workers.start();
  client = sb.client();
});
afterAll(async () => {
  await workers.stop();
  await sb.cleanup();
});

const call = (tool: string, args: Record<string, unknown>) => client.call({ ...who, tool, arguments: args });
const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';

describe('DATA_QUERY_SQL with as_of of a moment not kept yet', () => {
  it('times out at the statement limit, though its moment was restored for it', async () => {
    expect((await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE t (x INTEGER)' })).ok).toBe(true);
    expect((await call('DATA_WRITE_SQL', { sql: 'INSERT INTO t VALUES (1)' })).ok).toBe(true);
    const moment = new Date().toISOString();
    const started = Date.now();
    expect(await call('DATA_QUERY_SQL', { sql: RUNAWAY, as_of: moment })).toMatchObject({ ok: false, error: { code: 'STATEMENT_TIMEOUT' } });
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 10_000);
    // The moment it restored is read as any kept one.
    expect(await call('DATA_QUERY_SQL', { sql: 'SELECT count(*) FROM t', as_of: moment })).toMatchObject({ ok: true, result: { rows: [[1]] } });
  }, 60_000);
});
