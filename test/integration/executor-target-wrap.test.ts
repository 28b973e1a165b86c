import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { TARGET_SLOTS } from '../../src/executor/target-refs.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

// Session 28, F3: one child sent more databases than it keeps numbers for (its numbering starts
// again from 0 and each number then names another database), pipelined many to a message, a
// plan's limits changed and the child SIGKILLed on the way: a read that found another tenant's
// database through a reused number would see that database's marker, not its own.

const DATABASES = TARGET_SLOTS + 100;
let dataDir: string;
let pool: ExecutorPool;
let targets: DbTarget[];

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-target-wrap-'));
  targets = Array.from({ length: DATABASES }, (_, i) => {
    const workspace = `w${i % 3}`;
    const id = `${workspace}/a${i}`;
    return { id, path: databasePath(dataDir, workspace, `a${i}`, i % 4), shard: i % 4, limits: PLAN_LIMITS.pro };
  });
  for (const t of targets) {
    fs.mkdirSync(path.dirname(t.path), { recursive: true });
    const file = new Database(t.path);
    file.pragma('journal_mode = WAL');
    file.exec('CREATE TABLE marker (db TEXT NOT NULL)');
    file.prepare('INSERT INTO marker VALUES (?)').run(t.id);
    file.close();
  }
  pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: 8,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
  });
  await pool.start();
});
afterAll(async () => {
  await pool?.stop();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

const marker = (o: ExecOutcome) => (o.ok ? (o.result as { rows: unknown[][] }).rows : o.error.code);
const readAll = (list: DbTarget[]) =>
  Promise.all(list.map((t) => pool.run({ op: 'query', db: t, sql: 'SELECT db FROM marker', params: [], maxRows: 10 }).then(marker)));

describe("one child's numbered targets past its slots", () => {
  it('reads each database, and only it, through two wraps, a change of limits and a SIGKILL', async () => {
    // In order, all in one tick: pipelined to the child many to a message, wrapping in one.
    expect(await readAll(targets)).toEqual(targets.map((t) => [[t.id]]));
    // Backwards: the first databases were numbered over, the last are numbers the child keeps.
    const backwards = [...targets].reverse();
    expect(await readAll(backwards)).toEqual(backwards.map((t) => [[t.id]]));
    // One workspace's plan changes: its targets go whole again under the numbers they have.
    const upgraded = targets.map((t) => (t.id.startsWith('w1/') ? { ...t, limits: PLAN_LIMITS.enterprise } : t));
    expect(await readAll(upgraded)).toEqual(upgraded.map((t) => [[t.id]]));
    // The child dies: the spare (or a new child) takes over with no numbers, and the workspace
    // goes back to its old plan. Backwards, so that the first reads are of the databases the
    // dead child had numbers for (forwards, the worker's numbering wraps before it reaches them).
    const killed = pool.pids[0]!;
    process.kill(killed, 'SIGKILL');
    await expect.poll(() => pool.pids[0] !== undefined && pool.pids[0] !== killed, { interval: 5, timeout: 30_000 }).toBe(true);
    expect(await readAll(backwards)).toEqual(backwards.map((t) => [[t.id]]));
  }, 120_000);
});
