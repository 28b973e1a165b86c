import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import { databasePath } from '../../src/contracts/database-id.ts';
import { planCall } from '../../src/policy/call-plan.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { AUDIT_TABLE } from '../../src/sqlite/sqlite-audit.ts';
import { sandbox } from '../helpers/harness.ts';
import { childrenOf, cpuTicks } from '../helpers/kill-in-statement.ts';
import { nextRun } from '../helpers/job-runs.ts';
import { startCli, stop } from '../helpers/processes.ts';
import { whoOf } from '../helpers/who.ts';

const sb = sandbox({ LOCK_DURATION_MS: '1500', STALLED_INTERVAL_MS: '500', LEASE_TTL_MS: '1000' });
const running: ChildProcess[] = [];
afterAll(async () => {
  for (const p of running) if (p.pid !== undefined && p.exitCode === null && p.signalCode === null) process.kill(p.pid, 'SIGCONT');
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

/** One row, computed long enough (seconds) that a worker can be stopped while its child runs it. */
const SLOW_INSERT = 'INSERT INTO t SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 6000000) SELECT x FROM c)';

async function startWorker(): Promise<ChildProcess> {
  const w = await startCli(['worker'], sb.env);
  running.push(w);
  return w;
}

/** CPU ticks of `pids` together; a child gone counts nothing. */
function ticksOf(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    try {
      sum += cpuTicks(pid);
    } catch {
      // Exited.
    }
  }
  return sum;
}

/** Rows of `t` in the agent's database file, read read-only beside the worker's child (0 while it has no such table). */
function rowsInFile(file: string): number {
  if (!fs.existsSync(file)) return 0;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  } catch {
    return 0;
  } finally {
    db.close();
  }
}

/**
 * Kills `worker` between its run's commit and its job's completion, from outside: the worker is
 * SIGSTOPped while its child runs the statement (the child, a process of its own, goes on and
 * commits), the database file is read until the row is there, then the worker is SIGKILLed
 * before it could hear the answer. A stop that came before the statement reached the child (its
 * children burn no CPU while it is stopped) is let go and tried again.
 */
async function killAfterCommit(worker: ChildProcess, file: string): Promise<void> {
  const pid = worker.pid!;
  for (let attempt = 0; attempt < 40; attempt++) {
    process.kill(pid, 'SIGSTOP');
    const children = childrenOf(pid);
    let last = ticksOf(children);
    let still = 0;
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (rowsInFile(file) === 1) {
        process.kill(pid, 'SIGKILL');
        await stop(worker, 'SIGKILL');
        return;
      }
      await new Promise((r) => setTimeout(r, 20));
      const now = ticksOf(children);
      still = now === last ? still + 1 : 0;
      last = now;
      // No child burned CPU for 0.4 s: the statement is not running yet.
      if (still >= 20) break;
    }
    process.kill(pid, 'SIGCONT');
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error('the statement never committed under a stopped worker');
}

/** The `call.completed` event of `callId`, from the stream's start. */
async function completedOf(client: AgentDbClient, callId: string): Promise<Record<string, unknown>> {
  for await (const e of client.events({ from: '0' })) if (e.callId === callId && e.type === 'call.completed') return e as Record<string, unknown>;
  throw new Error('no call.completed');
}

/**
 * Runs a write's job through two worker kills, the first before its commit, the second after it
 * (session 35, F14: D2's leftover), and answers the worker left running.
 */
async function killTwiceLastAfterCommit(queue: Queue, jobId: string, file: string): Promise<ChildProcess> {
  let worker = running.at(-1)!;
  const first = await nextRun(queue, jobId, undefined);
  await stop(worker, 'SIGKILL');
  worker = await startWorker();
  await nextRun(queue, jobId, first);
  expect(rowsInFile(file)).toBe(0);
  await killAfterCommit(worker, file);
  return startWorker();
}

describe('a write whose worker is killed after its commit, its job stalled twice', () => {
  it('answers an approved write ok from its record, with its approval ran ok and its audit row written', async () => {
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    await new MemberRegistry(redis, keys).add('acme', 'alice', 'member');
    await startWorker();
    const client = sb.client();
    const plain = { workspace: 'acme', agent: 'apprv', settings: { database: 'agent' as const } };
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const call = {
      ...plain,
      settings: { ...plain.settings, approval: 'write' as const },
      callId: 'after-commit-1',
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: SLOW_INSERT },
    };
    const parked = (await client.call(call, { wait: false })) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');
    const plan = planCall(call, sb.config.shardCount);
    if (!plan.ok) throw new Error('plan failed');
    const file = databasePath(sb.config.dataDir, 'acme', 'apprv', plan.plan.shard);
    const queue = new Queue(keys.queueName(plan.plan.shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    const jobId = callKey('acme', 'apprv', 'after-commit-1');
    expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });

    await killTwiceLastAfterCommit(queue, jobId, file);

    // Main answered UNAVAILABLE mayStillRun here, its record saying it had committed.
    const answer = await client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect(answer).toMatchObject({ ok: true, result: { changes: 1, lastInsertRowid: 1 } });
    expect(answer).not.toHaveProperty('mayStillRun');
    expect(await completedOf(client, parked.callId)).toMatchObject({ ok: true });
    expect(await new ApprovalStore(redis, keys).get(parked.approval.id)).toMatchObject({ state: 'approved', ran: { ok: true } });
    // The decision's audit row is in the database without a resend (main: none until then).
    const db = new Database(file, { readonly: true });
    const audit = db.prepare(`SELECT decision, ran_ok FROM ${AUDIT_TABLE} WHERE approval_id = ?`).get(parked.approval.id);
    db.close();
    expect(audit).toEqual({ decision: 'approved', ran_ok: 1 });
    expect(rowsInFile(file)).toBe(1);
    // Sent again under its id: the same answer, nothing run again.
    expect(await client.call(call)).toMatchObject({ ok: true, result: { changes: 1, lastInsertRowid: 1 } });
    expect(rowsInFile(file)).toBe(1);
    await queue.close();
    redis.disconnect();
  }, 120_000);

  it('answers a plain write ok from its record', async () => {
    const client = sb.client();
    const plain = { workspace: 'acme', agent: 'plainw', settings: { database: 'agent' as const } };
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const call = { ...plain, callId: 'after-commit-2', tool: 'DATA_WRITE_SQL', arguments: { sql: SLOW_INSERT } };
    const plan = planCall(call, sb.config.shardCount);
    if (!plan.ok) throw new Error('plan failed');
    const file = databasePath(sb.config.dataDir, 'acme', 'plainw', plan.plan.shard);
    const keys = keysFor(sb.config.prefix);
    const queue = new Queue(keys.queueName(plan.plan.shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    expect(await client.call(call, { wait: false, timeoutMs: 50 })).toMatchObject({ ok: false });

    await killTwiceLastAfterCommit(queue, callKey('acme', 'plainw', 'after-commit-2'), file);

    // Main: UNAVAILABLE mayStillRun, "it may have run", though it had.
    const answer = await client.result('after-commit-2', { workspace: 'acme', agent: 'plainw', wait: true });
    expect(answer).toMatchObject({ ok: true, result: { changes: 1, lastInsertRowid: 1 } });
    expect(answer).not.toHaveProperty('mayStillRun');
    expect(await completedOf(client, 'after-commit-2')).toMatchObject({ ok: true });
    expect(rowsInFile(file)).toBe(1);
    await queue.close();
  }, 120_000);
});
