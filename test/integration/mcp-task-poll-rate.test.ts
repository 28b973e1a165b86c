import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 30, T7 left it, session 31, T8 closed it: tasks/get and tasks/result were counted
// nowhere, so one client asking in a loop cost Redis two to three reads a request for free. They
// are counted now in a bucket of each principal's own (TASK_POLLS_PER_MINUTE), apart from its
// calls and lookups: past it -32600 RATE_LIMITED with the seconds to wait, and another key, or the
// same key's calls, spend nothing of it.

let sb: Sandbox;
let k: KeyedApp;
let base: string;
let careful: string;
let other: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // Five follow-ups a key per window; calls and lookups as the plan has them.
  k = keyedApp(sb, { approvalWaitMs: 1000, rateLimits: { windowS: 600, taskPolls: 5 } });
  careful = await k.agentKey('polls', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  other = await k.agentKey('polls', 'other', { displayName: 'Other', settings: { database: 'agent', approval: 'write' } });
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

type RpcAnswer = { result?: { task?: { taskId: string; status: string }; status?: string }; error?: { code: number; message: string; data?: unknown } };

async function rpc(key: string, method: string, params: unknown): Promise<RpcAnswer> {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as never;
}

/** A write that waits for a person, sent as a task: its task's id. */
async function waitingTask(key: string): Promise<string> {
  const sent = await rpc(key, 'tools/call', { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE w (x)' }, task: { ttl: 60_000 } });
  expect(sent.result?.task).toMatchObject({ status: 'working' });
  return sent.result!.task!.taskId;
}

it('counts tasks/get, tasks/result and tasks/cancel per key and refuses past the bound with RATE_LIMITED and when to ask again', async () => {
  const taskId = await waitingTask(careful);
  for (let i = 0; i < 5; i++) expect((await rpc(careful, 'tasks/get', { taskId })).result).toMatchObject({ status: 'working' });
  const refused = await rpc(careful, 'tasks/get', { taskId });
  expect(refused.error).toMatchObject({ code: -32600, message: expect.stringMatching(/RATE_LIMITED: .* ask again in \d+ s/), data: { code: 'RATE_LIMITED' } });
  expect((await rpc(careful, 'tasks/result', { taskId })).error).toMatchObject({ data: { code: 'RATE_LIMITED' } });
  expect((await rpc(careful, 'tasks/cancel', { taskId })).error).toMatchObject({ data: { code: 'RATE_LIMITED' } });
  // A task id that is no task is counted as well: probing costs the same.
  expect((await rpc(careful, 'tasks/get', { taskId: 'nope' })).error).toMatchObject({ data: { code: 'RATE_LIMITED' } });
  // Another key's follow-ups are its own; the key's calls are not spent by its polling.
  const theirs = await waitingTask(other);
  expect((await rpc(other, 'tasks/get', { taskId: theirs })).result).toMatchObject({ status: 'working' });
  expect((await rpc(careful, 'tools/call', { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1 AS one' } })).result).toMatchObject({ isError: false });
});
