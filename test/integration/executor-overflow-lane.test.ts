import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool, type ExecutorPoolOptions } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome, Param } from '../../src/executor/executor-protocol.ts';
import { Metrics } from '../../src/metrics.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
/** Cheap or a runaway by its parameter: what a workspace can warm up and then make slow. */
const UP_TO = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) SELECT count(*) FROM c';
const READ = 'SELECT count(*) FROM t';
const DEADLINE = 2500;

let dataDir: string;
const pools: ExecutorPool[] = [];

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-lane-'));
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.stop()));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** One pooled child and one overflow child: what holds the pooled one decides who waits. */
async function started(opts: Partial<ExecutorPoolOptions> = {}): Promise<ExecutorPool> {
  const pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    overflow: 1,
    longMs: 100,
    dataDir,
    statementTimeoutMs: DEADLINE,
    heapLimitMb: 256,
    handleCacheSize: 64,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
    ...opts,
  });
  pools.push(pool);
  await pool.start();
  return pool;
}

const db = (workspace: string): DbTarget => ({
  id: workspace,
  path: databasePath(dataDir, workspace, undefined, 0),
  shard: 0,
  limits: PLAN_LIMITS.enterprise,
});
let seq = 0;
const write = (p: ExecutorPool, ws: string, sql: string) => p.run({ op: 'write', db: db(ws), sql, params: [], callKey: `c${++seq}` });
const read = (p: ExecutorPool, ws: string, sql: string, params: Param[] = []) => p.run({ op: 'query', db: db(ws), sql, params, maxRows: 10 });
const code = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);

/** Records the order in which promises settle. */
function settleOrder() {
  const order: string[] = [];
  return { order, track: <T>(name: string, p: Promise<T>) => p.finally(() => order.push(name)) };
}

/** Waits until the pooled child runs a statement of `workspace` (the pool's own status says so). */
async function pooledRuns(pool: ExecutorPool, workspace: string): Promise<void> {
  await expect.poll(() => pool.status().children[0]?.database, { interval: 10, timeout: 10_000 }).toBe(workspace);
}

/** A workspace that made its table and read it twice, quickly: cheap, with `READ` on record. */
async function warmed(pool: ExecutorPool, ws: string): Promise<void> {
  expect(code(await write(pool, ws, 'CREATE TABLE IF NOT EXISTS t (v)'))).toBe('ok');
  for (let i = 0; i < 2; i++) expect(code(await read(pool, ws, READ))).toBe('ok');
}

describe('the overflow lane (issue 27)', () => {
  it("answers a quiet workspace's known read on the lane's child while a runaway holds the pool; a warmed workspace's new runaway does not take it", async () => {
    const pool = await started();
    expect(pool.status()).toMatchObject({ size: 1, overflow: 1, children: [{ child: 0 }, { child: 1, overflow: true }] });
    await warmed(pool, 'quiet');
    await warmed(pool, 'warm');

    const { order, track } = settleOrder();
    const hog = track('hog', read(pool, 'hog', FOREVER));
    await pooledRuns(pool, 'hog');
    // Cheap by its record, but a statement it never ran: it waits for the pooled child.
    const warm = track('warm', read(pool, 'warm', FOREVER));
    const quiet = await track('read', read(pool, 'quiet', READ));
    expect(quiet).toMatchObject({ ok: true, result: { rows: [[0]] } });
    expect(order).toEqual(['read']);

    expect(code(await hog)).toBe('STATEMENT_TIMEOUT');
    expect(code(await warm)).toBe('STATEMENT_TIMEOUT');
    expect(order).toEqual(['read', 'hog', 'warm']);
  }, 30_000);

  it('lets a workspace whose warmed-up statement ran long in the lane have it only once: it then waits for the pool like the rest', async () => {
    const metrics = new Metrics();
    const pool = await started({ metrics });
    for (let i = 0; i < 2; i++) expect(code(await read(pool, 'slow', UP_TO, [10]))).toBe('ok');

    const { order, track } = settleOrder();
    const hog = track('hog', read(pool, 'hog', FOREVER));
    await pooledRuns(pool, 'hog');
    // The same statement, made a runaway by its parameter: on record as cheap, it takes the lane.
    const slow = track('slow', read(pool, 'slow', UP_TO, [1e15]));
    await expect.poll(() => pool.status().children[1]?.database, { interval: 10, timeout: 10_000 }).toBe('slow');
    expect(code(await slow)).toBe('STATEMENT_TIMEOUT');
    expect(code(await hog)).toBe('STATEMENT_TIMEOUT');

    // Out of the lane now, even for its cheap form, which its record says runs quickly.
    expect(code(await read(pool, 'slow', UP_TO, [10]))).toBe('ok');
    const hog2 = track('hog2', read(pool, 'hog', FOREVER));
    await pooledRuns(pool, 'hog');
    const again = track('again', read(pool, 'slow', UP_TO, [10]));
    expect(code(await again)).toBe('ok');
    expect(code(await hog2)).toBe('STATEMENT_TIMEOUT');
    // It ran beside the hog (which started first), and then, banned, waited behind the second.
    expect(order).toEqual(['hog', 'slow', 'hog2', 'again']);
    expect(await metrics.text()).toMatch(/agentdb_executor_overflow_runs_total\{ran="long"\} 1\n/);
  }, 60_000);

  it('judges a lane run by its executor time: a quick write that waited for a lock there keeps its workspace in the lane', async () => {
    const metrics = new Metrics();
    const pool = await started({ metrics });
    await warmed(pool, 'locked');
    const INSERT = 'INSERT INTO t VALUES (1)';
    for (let i = 0; i < 2; i++) expect(code(await write(pool, 'locked', INSERT))).toBe('ok');
    // Held from outside: the write waits in its child (busy timeout), spending no CPU.
    const outside = new Database(db('locked').path);
    try {
      const { order, track } = settleOrder();
      const hog = track('hog', read(pool, 'hog', FOREVER));
      await pooledRuns(pool, 'hog');
      outside.exec('BEGIN IMMEDIATE');
      const waiting = track('write', write(pool, 'locked', INSERT));
      await expect.poll(() => pool.status().children[1], { interval: 10, timeout: 10_000 }).toMatchObject({ database: 'locked' });
      await expect.poll(() => pool.status().children[1]?.runningMs ?? 0, { interval: 10, timeout: 10_000 }).toBeGreaterThanOrEqual(300);
      outside.exec('COMMIT');
      expect(code(await waiting)).toBe('ok');
      // Still in the lane: its read goes there, beside the hog.
      expect(code(await track('read', read(pool, 'locked', READ)))).toBe('ok');
      expect(order).toEqual(['write', 'read']);
      expect(code(await hog)).toBe('STATEMENT_TIMEOUT');
      expect(await metrics.text()).toMatch(/agentdb_executor_overflow_runs_total\{ran="short"\} 2\n/);
      expect(await metrics.text()).not.toMatch(/ran="long"/);
    } finally {
      outside.close();
    }
  }, 30_000);

  it('keeps the lane shut while a pooled child is free or its statement is young, so nothing runs there for nothing', async () => {
    const metrics = new Metrics();
    const pool = await started({ metrics, longMs: 60_000 });
    await warmed(pool, 'quiet');
    const { order, track } = settleOrder();
    const hog = track('hog', read(pool, 'hog', FOREVER));
    await pooledRuns(pool, 'hog');
    // The hog's statement never counts as long (60 s): the read waits for the pooled child.
    const quiet = track('read', read(pool, 'quiet', READ));
    expect(code(await hog)).toBe('STATEMENT_TIMEOUT');
    expect(code(await quiet)).toBe('ok');
    expect(order).toEqual(['hog', 'read']);
    expect(await metrics.text()).not.toMatch(/agentdb_executor_overflow_runs_total\{/);
  }, 30_000);
});
