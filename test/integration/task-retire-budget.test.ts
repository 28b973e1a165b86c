import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TaskBudget, taskEntry } from '../../src/calls/task-budget.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { retire } from '../../src/mcp/replaced-tasks.ts';
import type { McpTaskDeps } from '../../src/mcp/task-store.ts';
import type { TaskRecord } from '../../src/mcp/task-record.ts';
import { keysFor, type Keys } from '../../src/redis/keys.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Session 32, A3: a replaced MCP task's retire made its Redis round trips one after another (the
// record read, the stub written, the list entry removed, then a read and a delete per former id
// dropped, then the budget's note), and the budget's rule for tasks was the MCP adapter's own.
// Now the rule is the core's (TaskBudget) and the retire is one transaction, then the note.
// Watched with MONITOR on a redis-server of the test's own (the shared one is too busy to watch).

const TTL = 60_000;
let server: OwnRedis;
let redis: Redis;
let monitor: Redis;
let keys: Keys;
let deps: Pick<McpTaskDeps, 'redis' | 'keys' | 'budget' | 'ttlMs'>;

beforeAll(async () => {
  server = await OwnRedis.start();
  redis = new Redis(server.url);
  await redis.ping();
  keys = keysFor('a3-retire');
  deps = { redis, keys, budget: new TaskBudget(new WorkspaceRedisBudget(redis, keys), TTL), ttlMs: TTL };
  monitor = await new Redis(server.url).monitor();
});
afterAll(async () => {
  monitor?.disconnect();
  await redis?.quit();
  await server?.remove();
});

const owner = 'tr.runner';
function record(taskId: string, pad = ''): TaskRecord {
  const at = new Date().toISOString();
  return { owner, callId: 'c1', task: { taskId, status: 'cancelled', ttl: TTL, createdAt: at, lastUpdatedAt: at, statusMessage: `waited${pad}` } };
}

/** Writes `r` as the store writes a task, counted by the core's rule. */
async function written(r: TaskRecord): Promise<string> {
  const json = JSON.stringify(r);
  await redis.set(keys.mcpTask(r.task.taskId), json, 'PX', TTL);
  await deps.budget.written('tr', { taskId: r.task.taskId, json });
  return json;
}

it("retires a replaced task in one transaction, then one note: the workspace's budget holds the stub alone", async () => {
  // The replaced task, with a long status message, and a former id now beyond FORMER_TASKS.
  const replaced = record('00000000-0000-4000-8000-00000000000a', 'x'.repeat(3000));
  const dropped = record('00000000-0000-4000-8000-00000000000d', 'y'.repeat(2000));
  await written(replaced);
  await written(dropped);

  // Everything this connection sends, as MONITOR reports it after it ran; ECHOes mark where the
  // retire starts and ends (reports of the writes above may still be on their way).
  const port = (redis as unknown as { stream: { localPort: number } }).stream.localPort;
  const all: string[] = [];
  const listen = (_t: string, args: string[], source: string) => {
    if (source.endsWith(`:${port}`)) all.push(args.join(' ').slice(0, 120));
  };
  monitor.on('monitor', listen);
  await redis.echo('retire-starts');
  await retire(deps, 'tr', replaced, '00000000-0000-4000-8000-0000000000ff', [dropped.task.taskId]);
  await redis.echo('retire-ended');
  await expect.poll(() => all.at(-1)).toBe('echo retire-ended');
  monitor.off('monitor', listen);
  const seen = all.slice(all.indexOf('echo retire-starts') + 1, -1);

  // Every read and write of the two tasks between one MULTI and its EXEC; after it, only the note.
  const exec = seen.indexOf('exec');
  expect(seen[0]).toBe('multi');
  expect(exec).toBeGreaterThan(0);
  expect(seen.slice(exec + 1)).toHaveLength(1);
  expect(seen[exec + 1]).toMatch(/^evalsha /);
  expect(seen.slice(0, exec).filter((c) => c.includes(dropped.task.taskId))).toHaveLength(2);

  // What the budget holds: the stub's entry, nothing of the two records it let go.
  const stub = await redis.get(keys.mcpTask(replaced.task.taskId));
  expect(JSON.parse(stub!)).toMatchObject({ followedBy: '00000000-0000-4000-8000-0000000000ff' });
  expect(await redis.get(keys.mcpTask(dropped.task.taskId))).toBeNull();
  const held = Number(await redis.get(keys.redisBudget('tr').held));
  expect(held).toBe(taskEntry({ taskId: replaced.task.taskId, json: stub! }, TTL).bytes);
});
