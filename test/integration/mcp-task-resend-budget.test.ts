import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 30, T7 (a hostile tenant): a call sent again as an MCP task got a new task every time,
// each counted in the workspace's Redis budget but never refused by it. Past its budget a resend
// answers its first outcome (session 29, F4) or where it stands (R1), and that answer made one more
// task holding the call's whole result for 48 h: 20 resends of one write, 21 tasks. With a write
// answering some hundreds of KB (RETURNING), a workspace on pro's 1,200 calls a minute grew Redis
// by hundreds of MB a minute past its budget, which is every tenant's Redis.

const CAP = 1000;
let sb: Sandbox;
let k: KeyedApp;
let base: string;
let bearer: string;
let careful: string;
let burst: string;

beforeAll(async () => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(CAP) });
  await sb.pool();
  k = keyedApp(sb, { approvalWaitMs: 1000 });
  bearer = await k.agentKey('tiny', 'flood', { displayName: 'Flood', settings: { database: 'agent' } });
  burst = await k.agentKey('burst', 'many', { displayName: 'Many', settings: { database: 'agent' } });
  careful = await k.agentKey('waits', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

/** What `workspace` holds in Redis, as its budget counts it. */
async function held(workspace = 'tiny'): Promise<number> {
  return Number((await k.redis.get(keysFor(sb.config.prefix).redisBudget(workspace).held)) ?? 0);
}

type RpcAnswer = { result?: { task?: { taskId: string; status: string } }; error?: { message: string } };

/** One JSON-RPC request to `/mcp` with `key`: its answer. */
async function rpc(key: string, method: string, params: unknown): Promise<RpcAnswer> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as never;
}

/** One task-augmented `tools/call` of DATA_WRITE_SQL, under the caller's own call id when given. */
function sendAsTask(sql: string, callId?: string, key = bearer): Promise<RpcAnswer> {
  const meta = callId ? { _meta: { 'agentdb/callId': callId } } : {};
  return rpc(key, 'tools/call', { name: 'DATA_WRITE_SQL', arguments: { sql }, task: { ttl: 60_000 }, ...meta });
}

it('the same call sent again as a task answers its one task: resends past the budget store nothing more', async () => {
  const first = await sendAsTask('CREATE TABLE t (x) -- a call that answers at once', 'own-1');
  const task = first.result?.task;
  expect(task).toMatchObject({ status: 'completed' });
  // The call and its task hold more than the workspace's budget of 1,000 bytes now.
  const after = await held();
  expect(after).toBeGreaterThan(CAP);
  for (let i = 0; i < 20; i++) {
    const again = await sendAsTask('CREATE TABLE t (x) -- a call that answers at once', 'own-1');
    // The call's outcome, as its task: the one made for it.
    expect(again.result?.task).toMatchObject({ taskId: task!.taskId, status: 'completed' });
  }
  expect(await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).toHaveLength(1);
  expect(await held()).toBeLessThanOrEqual(after);
});

it("a task cancelled and its call sent again leaves one task: the new one takes the cancelled one's place", async () => {
  // The write waits for a person; its workspace holds its budget of 1,000 bytes from then on.
  const first = await sendAsTask('CREATE TABLE w (x)', undefined, careful);
  let task = first.result?.task;
  expect(task).toMatchObject({ status: 'working' });
  const after = await held('waits');
  expect(after).toBeGreaterThan(CAP);
  let settled = 0;
  for (let i = 0; i < 10; i++) {
    expect((await rpc(careful, 'tasks/cancel', { taskId: task!.taskId })).error).toBeUndefined();
    // Sent again, the write joins its waiting call (past the budget: where it stands) with a new task.
    const again = (await sendAsTask('CREATE TABLE w (x)', undefined, careful)).result?.task;
    expect(again).toMatchObject({ status: 'working' });
    expect(again!.taskId).not.toBe(task!.taskId);
    // The cancelled one is not kept beside it whole for 48 h: a stub answers for its id (session
    // 31, T8: it was "no such task"), and stays cancelled.
    expect((await rpc(careful, 'tasks/get', { taskId: task!.taskId })).result).toMatchObject({ taskId: task!.taskId, status: 'cancelled' });
    task = again;
    if (i === 4) settled = await held('waits');
  }
  // The live task and the stubs of the last FORMER_TASKS (3) it replaced; beside the other test's one.
  expect(await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).toHaveLength(5);
  expect(await held('waits')).toBeLessThanOrEqual(settled);
});

it('ten sends of one call as a task at the same moment make one task', async () => {
  const before = (await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).length;
  // Sent once without a task: it runs, and its workspace holds its budget from then on.
  const plain = await rpc(burst, 'tools/call', { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' }, _meta: { 'agentdb/callId': 'own-2' } });
  expect(plain.error).toBeUndefined();
  // Ten resends as tasks at once, each answered the call's outcome: the first to link its task wins.
  const sends = await Promise.all(Array.from({ length: 10 }, () => sendAsTask('CREATE TABLE t (x)', 'own-2', burst)));
  const ids = new Set(sends.map((s) => s.result?.task?.taskId));
  expect(ids.size).toBe(1);
  expect([...ids][0]).toEqual(expect.any(String));
  expect(await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).toHaveLength(before + 1);
});
