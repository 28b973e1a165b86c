import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/redis/connection.ts';
import { readExecutors } from '../../src/shards/executor-status-publisher.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox } from '../helpers/harness.ts';
import { alive, startCli, stop } from '../helpers/processes.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
// The statement would run for minutes: only the child's own watch can end it in time.
const sb = sandbox({ STATEMENT_TIMEOUT_MS: '600000', EXECUTOR_POOL_SIZE: '2' });
const running: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

/** Whether `pid` is a live process (a zombie waiting for its reaper is not). */
async function pool() {
  const redis = connectRedis(sb.config.redisUrl);
  try {
    return (await readExecutors(redis, keysFor(sb.config.prefix)))[0]?.pool;
  } finally {
    redis.disconnect();
  }
}

describe('executor children of a worker that is SIGKILLed', () => {
  it('die with it, the one in the middle of a long statement and the spare included', async () => {
    const worker = await startCli(['worker'], sb.env);
    running.push(worker);
    const client = sb.client();
    const call = client.call(
      { callId: 'orphan-1', workspace: 'w', agent: 'a', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } },
      { timeoutMs: 2000 },
    );
    call.catch(() => undefined);
    const poll = { interval: 50, timeout: 20_000 };
    await expect.poll(async () => (await pool())?.children.find((c) => c.callId === 'orphan-1')?.state, poll).toBe('running');
    await expect.poll(async () => (await pool())?.spare, poll).toBeTypeOf('number');
    const status = (await pool())!;
    const busy = status.children.find((c) => c.callId === 'orphan-1')!.pid!;
    const pids = [...status.children.map((c) => c.pid!), status.spare!];
    expect(pids.every(alive)).toBe(true);

    await stop(worker, 'SIGKILL');
    await expect.poll(() => pids.filter(alive), poll).toEqual([]);
    expect(pids).toContain(busy);
  });
});
