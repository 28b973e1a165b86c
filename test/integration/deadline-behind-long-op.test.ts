import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

// A statement sent to a child behind a request with a long deadline of its own (a snapshot's or
// a restore's 30 minutes) kept that request's timer when it became the head: a read queued
// behind `agentdb backup now`'s snapshot ran to its end, seconds past STATEMENT_TIMEOUT_MS
// (review R2). The long request here is a write held on a lock this test holds.

// Seconds of work, far past the pool's 500 ms limit, but bounded: run to its end, it answers ok.
const HEAVY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000000) SELECT count(*) FROM c';

let dataDir: string;
let pool: ExecutorPool;
let holder: Database.Database;
const code = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-deadline-behind-'));
  pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 500,
    heapLimitMb: 256,
    handleCacheSize: 4,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
  });
  await pool.start();
});
afterAll(async () => {
  holder?.close();
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a statement queued behind a request with a long deadline', () => {
  it('is stopped at its own deadline once it runs', async () => {
    const target: DbTarget = { id: 'slow/a', path: databasePath(dataDir, 'slow', 'a', 0), shard: 0, limits: PLAN_LIMITS.enterprise };
    fs.mkdirSync(path.dirname(target.path), { recursive: true });
    holder = new Database(target.path);
    holder.pragma('journal_mode = WAL');
    holder.exec('CREATE TABLE t (x)');
    holder.exec('BEGIN IMMEDIATE');
    // Waits in its child on the lock held here (the handle's busy timeout), under its own long deadline.
    const long = pool.run({ op: 'write', db: target, sql: 'INSERT INTO t VALUES (1)', params: [], callKey: 'long', timeoutMs: 600_000 });
    await expect.poll(() => pool.status().children.some((c) => c.database === 'slow/a'), { interval: 5, timeout: 10_000 }).toBe(true);
    const behind = pool.run({ op: 'query', db: target, sql: HEAVY, params: [], maxRows: 10 });
    await expect.poll(() => pool.status().children.find((c) => c.database === 'slow/a')?.behind, { interval: 5, timeout: 10_000 }).toBe(1);
    holder.exec('COMMIT');
    expect(code(await long)).toBe('ok');
    expect(code(await behind)).toBe('STATEMENT_TIMEOUT');
  });
});
