import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { killInStatement } from '../helpers/kill-in-statement.ts';
import { whoOf } from '../helpers/who.ts';

// Session 37, F17: a person approves a write, and the executor child running it is SIGKILLed
// from outside mid-statement (an operator, the OOM killer). The decision is kept and the
// outcome told truly: UNAVAILABLE "nothing of it was written" (its record read and not there),
// on the call and on the approval; sent again under its id it runs once on the same approval,
// nobody asked again, and the approval records the run. Passes on main (coverage).

/** A write that computes for a second or more before it inserts its one row. */
const SLOW_INSERT =
  "INSERT INTO t (call, n) SELECT 'ap-1', (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 6000000) SELECT count(*) FROM c)";
const who = { workspace: 'apkill', agent: 'a', settings: { database: 'agent' as const, approval: 'write' as const } };

let sb: Sandbox;
let worker: ShardWorkerPool;
let client: AgentDbClient;
let store: ApprovalStore;
let file: string;
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

beforeAll(async () => {
  // One pooled child: `executorPids[0]` runs the approved write.
  sb = sandbox({ EXECUTOR_POOL_SIZE: '1', EXECUTOR_OVERFLOW: '0', STATEMENT_TIMEOUT_MS: '60000' });
  worker = await sb.pool();
  client = sb.client();
  store = new ApprovalStore(redis, keysFor(sb.config.prefix));
  file = databasePath(sb.dataDir, who.workspace, who.agent, shardOf(`${who.workspace}/${who.agent}`, sb.config.shardCount));
  await new MemberRegistry(redis, keysFor(sb.config.prefix)).add(who.workspace, 'ada', 'admin');
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

/** Sends a write and waits until it is parked for a person (its effect is computed first). */
async function parked(callId: string, sql: string): Promise<AwaitingAnswer> {
  await client.call({ ...who, callId, tool: 'DATA_WRITE_SQL', arguments: { sql } }, { wait: false });
  let answer = await client.result(callId, { workspace: who.workspace, agent: who.agent, wait: false });
  await expect
    .poll(async () => (answer = await client.result(callId, { workspace: who.workspace, agent: who.agent, wait: false })).status, { timeout: 60_000 })
    .toBe('awaiting_approval');
  return answer as AwaitingAnswer;
}

it('keeps the decision of an approved write whose child is killed mid-statement, and runs it once when sent again', async () => {
  const made = await parked('ap-0', 'CREATE TABLE t (call TEXT, n INTEGER)');
  const created = client.result(made.callId, { ...whoOf(made), wait: true });
  await client.decide(made.approval.id, { decision: 'approve', by: 'ada', operator: true });
  expect(await created).toMatchObject({ ok: true });

  const waiting = await parked('ap-1', SLOW_INSERT);
  const outcome = client.result(waiting.callId, { ...whoOf(waiting), wait: true });
  await client.decide(waiting.approval.id, { decision: 'approve', by: 'ada', operator: true });
  await killInStatement(worker);
  expect(await outcome).toMatchObject({
    ok: false,
    error: { code: 'UNAVAILABLE', message: expect.stringMatching(/killed from outside.*nothing of it was written/) },
  });
  expect(await store.get(waiting.approval.id)).toMatchObject({ state: 'approved', decidedBy: 'ada', ran: { ok: false, code: 'UNAVAILABLE' } });

  // Sent again under its id: it runs on the same approval, once.
  await client.call({ ...who, callId: 'ap-1', tool: 'DATA_WRITE_SQL', arguments: { sql: SLOW_INSERT } }, { wait: false });
  expect(await client.result('ap-1', { ...whoOf(waiting), wait: true })).toMatchObject({ ok: true, result: { changes: 1 } });
  expect(await store.get(waiting.approval.id)).toMatchObject({ state: 'approved', ran: { ok: true } });
  const outside = new Database(file, { readonly: true });
  try {
    expect(outside.prepare('SELECT call, n FROM t').all()).toEqual([{ call: 'ap-1', n: 6_000_000 }]);
  } finally {
    outside.close();
  }
}, 180_000);
