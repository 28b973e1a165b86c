import type { ChildProcess } from 'node:child_process';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { planCall } from '../../src/policy/call-plan.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox } from '../helpers/harness.ts';
import { startCli, stop } from '../helpers/processes.ts';
import { callKey } from '../../src/contracts/call-identity.ts';

const sb = sandbox({ LOCK_DURATION_MS: '1500', STALLED_INTERVAL_MS: '500', LEASE_TTL_MS: '1000' });
const running: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

const who = { workspace: 'acme', agent: 'crashy', settings: { database: 'agent' as const } };
const ROWS = 1_500_000;

describe('a worker SIGKILLed in the middle of a write', () => {
  it('leaves the write in place exactly once, finished by the worker that takes over', async () => {
    const first = await startCli(['worker'], sb.env);
    running.push(first);
    const client = sb.client();
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE big (x INTEGER)' } });

    const write = {
      ...who,
      callId: 'crash-write-1',
      tool: 'DATA_WRITE_SQL',
      arguments: {
        sql: `INSERT INTO big SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${ROWS}) SELECT x FROM c)`,
      },
    };
    const outcome = client.call(write);

    const plan = planCall(write, sb.config.shardCount);
    if (!plan.ok) throw new Error('plan failed');
    const keys = keysFor(sb.config.prefix);
    const queue = new Queue(keys.queueName(plan.plan.shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    await expect.poll(() => queue.getJobState(callKey('acme', 'crashy', 'crash-write-1')), { interval: 5, timeout: 10_000 }).toBe('active');
    await stop(first, 'SIGKILL');

    const second = await startCli(['worker'], sb.env);
    running.push(second);
    const envelope = await outcome;
    expect(envelope).toMatchObject({ ok: true, result: { changes: ROWS } });

    const count = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*), count(DISTINCT x) FROM big' } });
    expect(count).toMatchObject({ ok: true, result: { rows: [[ROWS, ROWS]] } });
    await queue.close();
  });
});
