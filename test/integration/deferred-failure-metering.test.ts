import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { readUsage } from '../../src/calls/usage.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { childPids } from '../../bench/cpu.ts';
import { sandbox } from '../helpers/harness.ts';
import { startCli, stop } from '../helpers/processes.ts';
import { RedisProxy } from '../helpers/redis-proxy.ts';

// Fault review F2 (session 27), F1's leftover: a metered failure (STATEMENT_TIMEOUT here) is
// announced, and was metered, only once BullMQ has stored the job's outcome (a run whose lock
// lapsed must not answer). A worker that died in between, its job stored as completed and nothing
// left to run it again, left the failure unmetered: the caller is answered (the job holds the
// envelope) and charged nothing. The worker here sends BullMQ's completion through a proxy that
// passes it to Redis and never passes the reply back, and is SIGKILLed there.

const sb = sandbox({ STATEMENT_TIMEOUT_MS: '1000' });
const redis = new Redis(sb.config.redisUrl);
const keys = keysFor(sb.config.prefix);
const who = { workspace: 'deferred', agent: 'a', settings: { database: 'agent' as const } };
const id = 'read-timed-out';
const running: ChildProcess[] = [];
let proxy: RedisProxy | undefined;
/** SIGKILLs a worker and its executor children, which would otherwise outlive it. */
async function kill(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  for (const pid of childPids(worker.pid!)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      // Listed, then gone by itself before the kill: nothing left to stop.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  await stop(worker, 'SIGKILL');
}

afterAll(async () => {
  for (const p of running) await kill(p);
  await proxy?.close();
  redis.disconnect();
  await sb.cleanup();
});

async function metered(tool: string): Promise<number> {
  return (await readUsage(redis, keys, who.workspace)).filter((r) => r.tool === tool).reduce((n, r) => n + r.calls, 0);
}

it('a metered failure is metered when its worker dies after BullMQ stored it and before it was announced', async () => {
  // BullMQ's completion of the call's job: its queue's completed set and the call's job id.
  const started = await RedisProxy.start(sb.config.redisUrl, (sent) => sent.includes('}:completed') && sent.includes(id) && sent.includes('STATEMENT_TIMEOUT'));
  proxy = started;
  const worker = await startCli(['worker'], { ...sb.env, REDIS_URL: started.url });
  running.push(worker);
  const client = sb.client();
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x INTEGER)' } })).toMatchObject({ ok: true });
  const sql = 'SELECT max(x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT x FROM c)';
  void client.call({ ...who, tool: 'DATA_QUERY_SQL', callId: id, arguments: { sql } }, { timeoutMs: 1000 }).catch(() => undefined);
  await started.held;
  // Redis ran the completion: the job is stored completed, with its failure.
  await expect
    .poll(
      async () => {
        const answer = await client.result(id, { workspace: who.workspace, agent: who.agent });
        return 'ok' in answer ? answer : undefined;
      },
      { interval: 50, timeout: 10_000 },
    )
    .toMatchObject({ ok: false, error: { code: 'STATEMENT_TIMEOUT' } });
  await kill(worker);
  // Charged as the call it is, once, though its worker never announced it.
  expect(await metered('DATA_QUERY_SQL')).toBe(1);
}, 60_000);
