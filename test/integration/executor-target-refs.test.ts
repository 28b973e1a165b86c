import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { ChildRequest, DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import type { PlanLimits } from '../../src/policy/plan-limits.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

let dataDir: string;
const pools: ExecutorPool[] = [];

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-target-refs-'));
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.stop()));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function onePool(): Promise<ExecutorPool> {
  const pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: 8,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
  });
  pools.push(pool);
  await pool.start();
  return pool;
}

const db = (agent: string, limits: PlanLimits = PLAN_LIMITS.pro): DbTarget => ({
  id: `refs/${agent}`,
  path: databasePath(dataDir, 'refs', agent, 0),
  shard: 0,
  limits,
});
let seq = 0;
const write = (p: ExecutorPool, target: DbTarget, sql: string) => p.run({ op: 'write', db: target, sql, params: [], callKey: `refs/${target.id}/c${++seq}` });
const read = (p: ExecutorPool, target: DbTarget) => p.run({ op: 'query', db: target, sql: 'SELECT count(*) AS n FROM t', params: [], maxRows: 10 });
const code = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);

/** The pool's one child in place now (its place's own). */
function childOf(pool: ExecutorPool): ChildProcess {
  const place = (pool as unknown as { places: { all: { children: { child: ChildProcess } }[] } }).places.all[0]!;
  return place.children.child;
}

/** Records what the worker writes to `child` (the messages still go: the child answers them). */
function watchSends(child: ChildProcess): ChildRequest[] {
  const seen: ChildRequest[] = [];
  const send = child.send.bind(child) as (...args: unknown[]) => boolean;
  child.send = ((message: ChildRequest[], ...rest: unknown[]) => {
    seen.push(...message);
    return send(message, ...rest);
  }) as ChildProcess['send'];
  return seen;
}

describe("a database's target sent to an executor child", () => {
  it('goes whole once, then as its number, and each request runs on its database', async () => {
    const pool = await onePool();
    const seen = watchSends(childOf(pool));
    expect(code(await write(pool, db('a'), 'CREATE TABLE t (x)'))).toBe('ok');
    expect(code(await write(pool, db('a'), 'INSERT INTO t VALUES (1)'))).toBe('ok');
    expect(await read(pool, db('a'))).toMatchObject({ ok: true, result: { rows: [[1]] } });
    expect(seen.map((m) => m.req.op)).toEqual(['write', 'write', 'query']);
    expect(seen.map((m) => ('db' in m.req ? typeof m.req.db : 'none'))).toEqual(['object', 'number', 'number']);
  });

  it('goes whole again to the child that replaces a dead one', async () => {
    const pool = await onePool();
    expect(code(await write(pool, db('b'), 'CREATE TABLE t (x)'))).toBe('ok');
    const dead = childOf(pool);
    const gone = new Promise((resolve) => dead.once('close', resolve));
    dead.kill('SIGKILL');
    await gone;
    await expect.poll(() => childOf(pool) !== dead && pool.status().children[0]?.state === 'idle', { interval: 5, timeout: 20_000 }).toBe(true);
    const seen = watchSends(childOf(pool));
    expect(await read(pool, db('b'))).toMatchObject({ ok: true, result: { rows: [[0]] } });
    expect(seen.map((m) => ('db' in m.req ? typeof m.req.db : 'none'))).toEqual(['object']);
  });

  it("takes a plan's changed limits at the next request, up and down", async () => {
    const pool = await onePool();
    const small: PlanLimits = { ...PLAN_LIMITS.pro, maxTables: 1 };
    const large: PlanLimits = { ...PLAN_LIMITS.pro, maxTables: 3 };
    expect(code(await write(pool, db('c', small), 'CREATE TABLE t (x)'))).toBe('ok');
    expect(code(await write(pool, db('c', small), 'CREATE TABLE u (x)'))).toBe('LIMIT_EXCEEDED');
    expect(code(await write(pool, db('c', large), 'CREATE TABLE u (x)'))).toBe('ok');
    expect(code(await write(pool, db('c', large), 'CREATE TABLE v (x)'))).toBe('ok');
    expect(code(await write(pool, db('c', small), 'CREATE TABLE w (x)'))).toBe('LIMIT_EXCEEDED');
  });
});
