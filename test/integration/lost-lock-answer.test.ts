import Database from 'better-sqlite3';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Review R2 (faults): a write answered STATEMENT_TIMEOUT (not mayStillRun) was in the database.
// Its executor child was SIGSTOPped past the deadline and killed; while the worker read the
// write's record on another child, the job's lock lapsed (a loaded host), BullMQ's stalled check
// handed the job back, and its second run committed the write. The first run's failure had
// already been announced to the caller: a run that no longer holds its job's lock must not
// answer for the call.

const who = { workspace: 'lostlock', agent: 'a', settings: { database: 'agent' as const } };

let sb: Sandbox;
let pool: ShardWorkerPool;
let client: AgentDbClient;
let redis: Redis;
let queue: Queue;
let file: string;

beforeAll(async () => {
  sb = sandbox({ EXECUTOR_POOL_SIZE: '1', EXECUTOR_OVERFLOW: '0', STATEMENT_TIMEOUT_MS: '1000' });
  pool = await sb.pool();
  client = sb.client();
  redis = new Redis(sb.config.redisUrl);
  const shard = shardOf(`${who.workspace}/${who.agent}`, sb.config.shardCount);
  file = databasePath(sb.dataDir, who.workspace, who.agent, shard);
  const keys = keysFor(sb.config.prefix);
  queue = new Queue(keys.queueName(shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
});
afterAll(async () => {
  await queue.close();
  redis.disconnect();
  await sb.cleanup();
});

function rowsOf(id: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t WHERE id = ?').get(id) as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('a run that lost its job lock', () => {
  it('never answers a write as failed that a second run of its job committed', async () => {
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (id TEXT)' } })).toMatchObject({ ok: true });
    // The child that has the database open stops: the write sent to it never starts.
    const stopped = pool.executorPids;
    for (const pid of stopped) process.kill(pid, 'SIGSTOP');
    const id = 'w-lost-lock';
    const answer = client.call({ ...who, tool: 'DATA_WRITE_SQL', callId: id, arguments: { sql: 'INSERT INTO t VALUES (?)', params: [id] } });
    const jobId = callKey(who.workspace, who.agent, id);
    for (;;) {
      const job = await queue.getJob(jobId);
      if (job && (await job.getState()) === 'active') {
        // The lock lapses, as on a host too loaded to renew it: BullMQ's stalled check hands the
        // job back to the queue, and it runs again once the first run's child has been killed.
        await redis.del(`${queue.qualifiedName}:${jobId}:lock`);
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const envelope = (await answer) as Envelope & { mayStillRun?: boolean };
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // killed at its deadline
      }
    }
    // Wait for the job's last run to end: its stored outcome is the call's.
    for (;;) {
      const job = await queue.getJob(jobId);
      const state = await job?.getState();
      if (state === 'completed' || state === 'failed') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const there = rowsOf(id);
    if (envelope.ok) expect(there, JSON.stringify(envelope)).toBe(1);
    else if (!envelope.mayStillRun) expect(there, `answered ${JSON.stringify(envelope)}, but the write is there`).toBe(0);
    // Sent again under its id, the call tells the same truth as its first answer.
    const again = await client.call({ ...who, tool: 'DATA_WRITE_SQL', callId: id, arguments: { sql: 'INSERT INTO t VALUES (?)', params: [id] } });
    expect(again.ok, JSON.stringify(again)).toBe(there === 1);
  }, 60_000);
});
