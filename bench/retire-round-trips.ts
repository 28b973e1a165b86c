// Session 32, A3: a replaced MCP task's retire, this checkout's against another's (BASE, a
// worktree of main): wall ms and this process's CPU ms per retire, one former id dropped each
// time, alternating A/B in rounds. `BASE=/work/wt/A3-base ROUNDS=6 N=300 node --import tsx bench/retire-round-trips.ts`
import { Redis } from 'ioredis';
import path from 'node:path';
import { TaskBudget } from '../src/calls/task-budget.ts';
import { WorkspaceRedisBudget } from '../src/calls/workspace-redis-budget.ts';
import { retire as retireNew } from '../src/mcp/replaced-tasks.ts';
import { keysFor } from '../src/redis/keys.ts';

const base = process.env.BASE ?? '/work/wt/A3-base';
const rounds = Number(process.env.ROUNDS ?? 6);
const n = Number(process.env.N ?? 300);
const { retire: retireOld } = (await import(path.join(base, 'src/mcp/replaced-tasks.ts'))) as { retire: typeof retireNew };
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const keys = keysFor(`bench-a3-${process.pid}`);
const TTL = 60_000;
const budget = new WorkspaceRedisBudget(redis, keys);
const depsNew = { redis, keys, budget: new TaskBudget(budget, TTL), ttlMs: TTL };
const depsOld = { redis, keys, budget, ttlMs: TTL, calls: undefined as never };
const owner = 'b.runner';
const rec = (taskId: string) => {
  const at = new Date().toISOString();
  return { owner, callId: 'c', task: { taskId, status: 'cancelled' as const, ttl: TTL, createdAt: at, lastUpdatedAt: at, statusMessage: 'w'.repeat(400) } };
};
let seq = 0;
async function one(retire: (...a: never[]) => Promise<void>, deps: object): Promise<void> {
  const a = `00000000-0000-4000-8000-${String(seq++).padStart(12, '0')}`;
  const d = `00000000-0000-4000-8000-${String(seq++).padStart(12, '0')}`;
  await redis.set(keys.mcpTask(a), JSON.stringify(rec(a)), 'PX', TTL);
  await redis.set(keys.mcpTask(d), JSON.stringify(rec(d)), 'PX', TTL);
  await (retire as (...a: unknown[]) => Promise<void>)(deps, 'b', rec(a), 'next', [d]);
}
const results: Record<string, { wall: number[]; cpu: number[] }> = { main: { wall: [], cpu: [] }, A3: { wall: [], cpu: [] } };
for (let r = 0; r < rounds; r++) {
  for (const side of r % 2 ? ['A3', 'main'] : ['main', 'A3']) {
    const [fn, deps] = side === 'main' ? [retireOld, depsOld] : [retireNew, depsNew];
    let wall = 0;
    let cpu = 0;
    for (let i = 0; i < n; i++) {
      // Measured with the two writes that set a retire up (2 round trips, the same on both sides).
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      await one(fn as never, deps);
      const c = process.cpuUsage(c0);
      wall += performance.now() - t0;
      cpu += (c.user + c.system) / 1000;
    }
    results[side]!.wall.push(wall / n);
    results[side]!.cpu.push(cpu / n);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [side, r] of Object.entries(results))
  console.log(`${side}: ms a retire (incl. 2 setup SETs) ${median(r.wall).toFixed(3)}, CPU ms ${median(r.cpu).toFixed(3)}`);
const left = await redis.keys(`bench-a3-${process.pid}:*`);
if (left.length) await redis.del(...left);
redis.disconnect();
