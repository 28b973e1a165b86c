import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAsOf } from '../../src/calls/as-of-run.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

// Review 19 (H27): a read's `as_of` whose moment is not kept yet ran the agent's statement in the
// same request as the moment's restore, under the restore's 10-minute limit: a runaway read held
// an executor child for 10 minutes instead of STATEMENT_TIMEOUT_MS, once per fresh moment.
const TIMEOUT_MS = 1500;
let dataDir = '';
let pool: ExecutorPool;

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-as-of-deadline-'));
  pool = new ExecutorPool({
    size: 2,
    workspaceShare: 2,
    dataDir,
    statementTimeoutMs: TIMEOUT_MS,
    heapLimitMb: 256,
    handleCacheSize: 4,
    maxResultBytes: 1024 * 1024,
    history: { checkpointBytes: 64 * 1024, retentionDays: 30 },
    child: builtExecutorChild,
  });
  await pool.start();
});

afterAll(async () => {
  await pool?.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const must = async (p: Promise<ExecOutcome>): Promise<unknown> => {
  const out = await p;
  if (!out.ok) throw new Error(`${out.error.code}: ${out.error.detail}`);
  return out.result;
};

describe('as_of: the read of a moment restored for it', () => {
  const db: DbTarget = { id: 'evil/a', path: databasePath(dataDir, 'evil', 'a', 0), shard: 0, limits: PLAN_LIMITS.enterprise };

  it('runs under the statement limit, not the restore limit', async () => {
    Object.assign(db, { path: databasePath(dataDir, 'evil', 'a', 0) });
    await must(pool.run({ op: 'write', db, sql: 'CREATE TABLE t (x INTEGER)', params: [], callKey: 'evil\0a\0c1' }));
    await must(pool.run({ op: 'write', db, sql: 'INSERT INTO t VALUES (1)', params: [], callKey: 'evil\0a\0c2' }));
    await must(pool.run({ op: 'capture', db }));
    const runaway = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
    const started = Date.now();
    const out = await runAsOf({ op: 'query', db, sql: runaway, params: [], maxRows: 10, asOf: { target: { at: Date.now() } } }, pool, undefined, 'evil');
    const took = Date.now() - started;
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.error.code).toBe('STATEMENT_TIMEOUT');
    // The restore of a one-row database takes milliseconds; the read gets one statement limit.
    expect(took).toBeLessThan(TIMEOUT_MS + 8000);
  }, 60_000);

  it('still reads the moment it restored', async () => {
    const out = await runAsOf(
      { op: 'query', db, sql: 'SELECT count(*) AS n FROM t', params: [], maxRows: 10, asOf: { target: { at: Date.now() } } },
      pool,
      undefined,
      'evil',
    );
    expect(out.ok).toBe(true);
    if (out.ok) {
      expect((out.result as { rows: unknown[][] }).rows).toEqual([[1]]);
      expect(out.asOf?.materialised).toBeDefined();
    }
  }, 60_000);
});
