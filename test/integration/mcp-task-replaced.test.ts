import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TaskBudget } from '../../src/calls/task-budget.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { FORMER_TASKS } from '../../src/mcp/replaced-tasks.ts';
import { RedisTaskStore } from '../../src/mcp/task-store.ts';
import type { McpToolResult } from '../../src/mcp/tool-result.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { Principal } from '../../src/registry/principal.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 30, T7 left it, session 31, T8 closed it: a call's MCP task replaced by a new one (the
// one before ended with an outcome the call has since run again for, or was cancelled) was
// deleted, and a client still following its id (the SDK polls tasks/get, then asks tasks/result)
// was told "no such task". The old id now answers the call's task of now; a cancelled one stays
// cancelled; the last FORMER_TASKS ids of a call answer so, older ones go (a bounded few).

let sb: Sandbox;
let k: KeyedApp;
let redis: Redis;
let store: RedisTaskStore;

const principal = { kind: 'agent', workspace: 'rt', agent: 'runner', keyId: 'k1', settings: { database: 'agent' }, surface: 'data' } as unknown as Principal;

function answer(code?: string): McpToolResult {
  return code
    ? { content: [{ type: 'text', text: code }], isError: true, structuredContent: { ok: false, error: { code } } }
    : { content: [{ type: 'text', text: 'ok' }], isError: false, structuredContent: { ok: true } };
}

beforeAll(async () => {
  sb = sandbox();
  k = keyedApp(sb);
  redis = new Redis(REDIS_URL);
  const keys = keysFor(sb.config.prefix);
  store = new RedisTaskStore({ redis, keys, calls: k.calls, budget: new TaskBudget(new WorkspaceRedisBudget(redis, keys), 60_000), ttlMs: 60_000 }, principal);
});
afterAll(async () => {
  redis.disconnect();
  await k.close();
  await sb.cleanup();
});

it("a task replaced after its call ran again answers, by its old id, the call's task of now", async () => {
  const first = await store.start({ callId: 'again-1', result: answer('UNAVAILABLE'), ok: false });
  expect(first.status).toBe('failed');
  // The call ran again, and answered otherwise: a new task takes the first one's place.
  const next = await store.start({ callId: 'again-1', result: answer(), ok: true });
  expect(next.taskId).not.toBe(first.taskId);
  expect(await store.getTask(first.taskId)).toMatchObject({ taskId: first.taskId, status: 'completed' });
  expect(await store.getTaskResult(first.taskId)).toMatchObject({ isError: false });
  expect(await store.awaitResult(first.taskId, 1000, new AbortController().signal)).toMatchObject({
    isError: false,
    _meta: { 'io.modelcontextprotocol/related-task': { taskId: first.taskId } },
  });
  // The list shows the call's one task.
  expect((await store.listTasks()).tasks.map((t) => t.taskId)).toEqual([next.taskId]);
});

it('a call run again and again keeps a bounded few of its former ids answering', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await store.start({ callId: 'again-2', result: answer(i % 2 ? undefined : 'UNAVAILABLE'), ok: i % 2 === 1 })).taskId);
  expect(new Set(ids).size).toBe(10);
  const answered = await Promise.all(ids.map((id) => store.getTask(id)));
  // The live task, and the last FORMER_TASKS before it, answer as the call's task of now (ok).
  expect(answered.slice(-1 - FORMER_TASKS).map((t) => t?.status)).toEqual(Array(1 + FORMER_TASKS).fill('completed'));
  expect(answered.slice(0, -1 - FORMER_TASKS)).toEqual(Array(10 - 1 - FORMER_TASKS).fill(null));
});
