import type { ChildProcess } from 'node:child_process';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { callKey } from '../../src/contracts/call-identity.ts';
import { planCall } from '../../src/policy/call-plan.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox } from '../helpers/harness.ts';
import { nextRun } from '../helpers/job-runs.ts';
import { startCli, stop } from '../helpers/processes.ts';

// Session 36, F15: a read whose job stalled twice (its workers SIGKILLed while it ran) was
// answered UNAVAILABLE `mayStillRun` "it may have run": a read has no effect, so its caller
// is owed its rows, or at least a refusal that does not suggest anything may still happen.
const sb = sandbox({ LOCK_DURATION_MS: '1500', STALLED_INTERVAL_MS: '500', LEASE_TTL_MS: '1000' });
const running: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

/** A read that computes for seconds: its job is active long enough for its worker to be killed. */
const SLOW_READ = 'SELECT count(*) AS n FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 6000000) SELECT x FROM c)';

async function startWorker(): Promise<ChildProcess> {
  const w = await startCli(['worker'], sb.env);
  running.push(w);
  return w;
}

/**
 * Sends the slow read under `callId` without waiting, SIGKILLs the worker of each of its first
 * `kills` runs, and answers its answer, then a resend's.
 */
async function readKilled(agent: string, callId: string, kills: number) {
  const who = { workspace: 'acme', agent, settings: { database: 'agent' as const } };
  const client = sb.client();
  await startWorker();
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } })).toMatchObject({ ok: true });
  const call = { ...who, callId, tool: 'DATA_QUERY_SQL', arguments: { sql: SLOW_READ } };
  const plan = planCall(call, sb.config.shardCount);
  if (!plan.ok) throw new Error('plan failed');
  const keys = keysFor(sb.config.prefix);
  const queue = new Queue(keys.queueName(plan.plan.shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
  expect(await client.call(call, { wait: false, timeoutMs: 50 })).toMatchObject({ ok: false });
  let taken: number | undefined;
  for (let i = 0; i < kills; i++) {
    taken = await nextRun(queue, callKey('acme', agent, callId), taken);
    await stop(running.at(-1)!, 'SIGKILL');
    await startWorker();
  }
  const answer = await client.result(callId, { workspace: 'acme', agent, wait: true });
  await queue.close();
  const again = await client.call(call);
  // One worker at a time: the next test's kills are meant for the worker running its job.
  await stop(running.at(-1)!, 'SIGKILL');
  return { answer, again };
}

describe('a read whose job stalled past its limit', () => {
  it('is run once more and answers its rows', async () => {
    const { answer } = await readKilled('reader1', 'read-stalled-1', 2);
    // Main: UNAVAILABLE mayStillRun "it may have run".
    expect(answer).toMatchObject({ ok: true, result: { rows: [[6_000_000]] } });
    expect(answer).not.toHaveProperty('mayStillRun');
  }, 120_000);

  it('stalled again on that run, is refused as a read: nothing may still run, and a resend runs it', async () => {
    const { answer, again } = await readKilled('reader2', 'read-stalled-2', 3);
    expect(answer).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    expect(answer).not.toHaveProperty('mayStillRun');
    expect((answer as { error: { message: string } }).error.message).toContain('nothing was changed');
    expect(again).toMatchObject({ ok: true, result: { rows: [[6_000_000]] } });
  }, 120_000);
});
