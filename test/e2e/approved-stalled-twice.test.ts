import type { ChildProcess } from 'node:child_process';
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
import { startCli, stop } from '../helpers/processes.ts';
import { whoOf } from '../helpers/who.ts';

const sb = sandbox({ LOCK_DURATION_MS: '1500', STALLED_INTERVAL_MS: '500', LEASE_TTL_MS: '1000' });
const running: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

const who = { workspace: 'acme', agent: 'stally', settings: { database: 'agent' as const, approval: 'write' as const } };
const plain = { workspace: 'acme', agent: 'stally', settings: { database: 'agent' as const } };
/** One row, computed long enough (seconds) that a worker can be killed while it runs. */
const SLOW_INSERT = 'INSERT INTO t SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 6000000) SELECT x FROM c)';

/** The `call.completed` event of `callId`, from the stream's start. */
async function completedOf(client: AgentDbClient, callId: string): Promise<Record<string, unknown>> {
  for await (const e of client.events({ from: '0' })) if (e.callId === callId && e.type === 'call.completed') return e as Record<string, unknown>;
  throw new Error('no call.completed');
}

// Session 34, D2 (D1's leftover): two worker kills in one approved run fail its job as stalled
// (UNAVAILABLE mayStillRun); the approval kept `approved` with no outcome until the agent resent.
describe('an approved call whose workers are SIGKILLed twice while it runs', () => {
  it('has its approval settled from the database record before its call.completed: ran or not, as the database says', async () => {
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    await new MemberRegistry(redis, keys).add('acme', 'alice', 'member');
    const start = async () => {
      const w = await startCli(['worker'], sb.env);
      running.push(w);
      return w;
    };
    let worker = await start();
    const client = sb.client();
    await client.call({ ...plain, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
    const call = { ...who, callId: 'stalled-twice-1', tool: 'DATA_WRITE_SQL', arguments: { sql: SLOW_INSERT } };
    const parked = (await client.call(call, { wait: false })) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');

    const plan = planCall(call, sb.config.shardCount);
    if (!plan.ok) throw new Error('plan failed');
    const queue = new Queue(keys.queueName(plan.plan.shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    const jobId = callKey('acme', 'stally', 'stalled-twice-1');
    expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });

    // Each run taken (a new processedOn, active) is killed in its worker, and another started.
    let taken: number | undefined;
    for (let kill = 0; kill < 2; kill++) {
      await expect
        .poll(
          async () => {
            const job = await queue.getJob(jobId);
            const state = job ? await job.getState() : undefined;
            return state === 'active' && job?.processedOn !== undefined && job.processedOn !== taken ? job.processedOn : undefined;
          },
          { interval: 5, timeout: 20_000 },
        )
        .toBeDefined();
      taken = (await queue.getJob(jobId))?.processedOn;
      await stop(worker, 'SIGKILL');
      worker = await start();
    }

    const answer = await client.result(parked.callId, { ...whoOf(parked), wait: true });
    await completedOf(client, parked.callId);
    // Read once the event is out: the approval says what the database says.
    const approval = await new ApprovalStore(redis, keys).get(parked.approval.id);
    const rows = await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } });
    const committed = (rows as unknown as { result: { rows: number[][] } }).result.rows[0]![0] === 1;
    expect(approval?.state).toBe('approved');
    // A run killed after its commit is answered from its record (stalled-after-commit.test.ts).
    expect(answer).toMatchObject(committed ? { ok: true } : { ok: false, error: { code: 'UNAVAILABLE' }, mayStillRun: true });
    expect(approval?.ran).toMatchObject(committed ? { ok: true } : { ok: false, code: 'UNAVAILABLE', message: expect.stringContaining('had not committed') });
    // The decision's audit row is written as it is settled, not only at the resend (session 35, F14).
    const file = databasePath(sb.config.dataDir, 'acme', 'stally', plan.plan.shard);
    const db = new Database(file, { readonly: true });
    const audit = db.prepare(`SELECT decision, ran_ok, ran_code FROM ${AUDIT_TABLE} WHERE approval_id = ?`).get(parked.approval.id);
    db.close();
    expect(audit).toEqual(committed ? { decision: 'approved', ran_ok: 1, ran_code: null } : { decision: 'approved', ran_ok: 0, ran_code: 'UNAVAILABLE' });

    // Sent again under its id: it runs (or replays), once, and the approval says it ran.
    expect(await client.call(call)).toMatchObject({ ok: true });
    expect(await client.call({ ...plain, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({ result: { rows: [[1]] } });
    expect(await new ApprovalStore(redis, keys).get(parked.approval.id)).toMatchObject({ ran: { ok: true } });
    await queue.close();
    redis.disconnect();
  }, 60_000);
});
