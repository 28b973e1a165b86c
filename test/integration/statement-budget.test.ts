import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import type { StatementCacheStats } from '../../src/sqlite/statement-cache.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

let dataDir: string;
let executor: ExecutorPool;
const BUDGET = 16 * 1024 * 1024;

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-stmt-budget-'));
  executor = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 60_000,
    heapLimitMb: 512,
    handleCacheSize: 64,
    maxResultBytes: 1024 * 1024,
    statementCacheBytes: BUDGET,
    child: builtExecutorChild,
  });
  await executor.start();
});
afterAll(async () => {
  await executor.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const target = (agent: string): DbTarget => ({
  id: `budget/${agent}`,
  path: databasePath(dataDir, 'budget', agent, 0),
  shard: 0,
  limits: PLAN_LIMITS.pro,
});

async function stats(): Promise<{ handles: number; statements: StatementCacheStats; rss: number }> {
  const outcome = await executor.run({ op: 'stats' });
  if (!outcome.ok) throw new Error(outcome.error.detail);
  return outcome.result as { handles: number; statements: StatementCacheStats; rss: number };
}

const ok = (o: ExecOutcome) => (o.ok ? 'ok' : `${o.error.code}: ${o.error.detail}`);
const inList = (seed: number, n: number) => `SELECT x FROM t WHERE x IN (${Array.from({ length: n }, (_, k) => seed * 1_000_000 + k).join(',')})`;

describe("the executor child's statement cache", () => {
  it('stays within STATEMENT_CACHE_BYTES while distinct IN lists run over several databases', async () => {
    const dbs = ['a', 'b', 'c'].map(target);
    for (const [i, db] of dbs.entries()) {
      expect(ok(await executor.run({ op: 'write', db, sql: 'CREATE TABLE t (x)', params: [], callKey: `create-${i}` }))).toBe('ok');
    }
    // 2,000 values: each is kept (well under a sixteenth of the budget), and sixty of them
    // are estimated at about 24 MB, past the 16 MiB budget.
    let most = 0;
    for (let i = 0; i < 60; i++) {
      expect(ok(await executor.run({ op: 'query', db: dbs[i % 3]!, sql: inList(i, 2000), params: [], maxRows: 10 }))).toBe('ok');
      const { statements } = await stats();
      expect(statements.budget).toBe(BUDGET);
      expect(statements.bytes).toBeLessThanOrEqual(BUDGET);
      most = Math.max(most, statements.count);
    }
    const { statements } = await stats();
    expect(most).toBeGreaterThan(10);
    expect(statements.count).toBeLessThan(60);
    expect(statements.bytes).toBeGreaterThan(BUDGET / 2);

    // An IN list of 12,000 values (about 2.5 MB estimated) runs, and is not kept.
    expect(ok(await executor.run({ op: 'query', db: dbs[0]!, sql: inList(99, 12_000), params: [], maxRows: 10 }))).toBe('ok');
    expect((await stats()).statements).toEqual(statements);
  });
});
