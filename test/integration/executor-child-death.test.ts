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

// Issue 25: answers that tell the truth after an executor child dies. One pool of one child (and
// its spare) serves every case. History capture checkpoints after every commit, before the
// answer goes out (`checkpointBytes: 1`): a snapshot this test holds open makes that checkpoint
// wait, and so holds a child between a write's commit and its answer for as long as a case needs.

let dataDir: string;
let pool: ExecutorPool;
const held: Database.Database[] = [];

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-death-'));
  pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 10_000,
    heapLimitMb: 256,
    handleCacheSize: 16,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
    history: { checkpointBytes: 1, retentionDays: 30 },
  });
  await pool.start();
});
afterAll(async () => {
  for (const h of held) h.close();
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function db(agent: string): DbTarget {
  return { id: `death/${agent}`, path: databasePath(dataDir, 'death', agent, 0), shard: 0, limits: PLAN_LIMITS.enterprise };
}

const write = (target: DbTarget, sql: string, callKey: string, timeoutMs?: number) =>
  pool.run({ op: 'write', db: target, sql, params: [], callKey, ...(timeoutMs ? { timeoutMs } : {}) });
const read = (target: DbTarget, sql: string, timeoutMs?: number) =>
  pool.run({ op: 'query', db: target, sql, params: [], maxRows: 10, ...(timeoutMs ? { timeoutMs } : {}) });
const code = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);

/** CPU time a process has used, in clock ticks (user + system, from /proc). */
function cpuTicks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** What the file itself holds: rows of `k`, and whether `_agentdb_calls` records key `key`. */
function inFile(target: DbTarget, k: string, key: string): { rows: number; recorded: boolean } {
  const outside = new Database(target.path, { readonly: true });
  try {
    const rows = (outside.prepare('SELECT count(*) AS n FROM t WHERE k = ?').get(k) as { n: number }).n;
    const recorded = outside.prepare('SELECT 1 FROM _agentdb_calls WHERE call_id = ?').get(key) !== undefined;
    return { rows, recorded };
  } finally {
    outside.close();
  }
}

/**
 * Holds a read snapshot of `target` from this process until `release()`: the checkpoint a
 * child runs after a commit, before answering, waits for it (up to the 5 s busy timeout).
 */
async function heldSnapshot(target: DbTarget): Promise<() => void> {
  // Open in the child first: its capture on opening checkpoints too, and would wait as well.
  expect(code(await read(target, 'SELECT count(*) FROM t'))).toBe('ok');
  const conn = new Database(target.path, { readonly: true });
  held.push(conn);
  conn.exec('BEGIN');
  conn.prepare('SELECT count(*) FROM t').get();
  return () => conn.exec('COMMIT');
}

describe('an executor child that dies', () => {
  let a: DbTarget;

  beforeAll(async () => {
    a = db('a');
    expect(code(await write(a, 'CREATE TABLE t (k TEXT, n INTEGER)', 'create'))).toBe('ok');
  });

  it('answers a write killed from outside after it committed with what it committed, and its key replays it', async () => {
    const w = { sql: "INSERT INTO t VALUES ('killed-after-commit', 1)", key: 'w1' };
    const release = await heldSnapshot(a);
    const written = write(a, w.sql, w.key);
    // Committed, and held in the checkpoint before its answer: killed there.
    await expect.poll(() => inFile(a, 'killed-after-commit', w.key), { interval: 5, timeout: 10_000 }).toEqual({ rows: 1, recorded: true });
    process.kill(pool.pids[0]!, 'SIGKILL');
    release();

    const answer = await written;
    expect(answer).toEqual({ ok: true, result: { changes: 1, lastInsertRowid: expect.anything(), columns: [], rows: [], truncated: false } });
    expect(inFile(a, 'killed-after-commit', w.key)).toEqual({ rows: 1, recorded: true });
    const again = await write(a, w.sql, w.key);
    expect(again).toEqual({ ...answer, replayed: true });
    expect(inFile(a, 'killed-after-commit', w.key).rows).toBe(1);
  });

  it('answers a write whose deadline passed after it committed with what it committed', async () => {
    const release = await heldSnapshot(a);
    const pid = pool.pids[0];
    const written = write(a, "INSERT INTO t VALUES ('deadline-after-commit', 1)", 'w2', 500);
    // Let go once its child was killed at the deadline, or the next child's checkpoint waits too.
    await expect.poll(() => pool.pids[0], { interval: 5, timeout: 10_000 }).not.toBe(pid);
    release();
    const answer = await written;
    expect(answer).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(inFile(a, 'deadline-after-commit', 'w2')).toEqual({ rows: 1, recorded: true });
  });

  it('answers a write killed before it committed with the failure, leaving nothing', async () => {
    const endless = "INSERT INTO t WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1000000000) SELECT 'killed-mid-write', x FROM c";
    const written = write(a, endless, 'w3');
    await expect.poll(() => pool.status().children[0]?.database, { interval: 5, timeout: 10_000 }).toBe('death/a');
    const pid = pool.pids[0]!;
    const before = cpuTicks(pid);
    await expect.poll(() => cpuTicks(pid) - before, { interval: 5, timeout: 10_000 }).toBeGreaterThanOrEqual(5);
    process.kill(pid, 'SIGKILL');
    expect(await written).toMatchObject({
      ok: false,
      error: { code: 'UNAVAILABLE', detail: expect.stringMatching(/signal SIGKILL.*before it committed: nothing of it was written/) },
    });
    expect(inFile(a, 'killed-mid-write', 'w3')).toEqual({ rows: 0, recorded: false });
  });

  it('answers neither success nor failure when the record cannot be read, so the call is run again', async () => {
    const release = await heldSnapshot(a);
    const written = write(a, "INSERT INTO t VALUES ('record-unread', 1)", 'w4');
    await expect.poll(() => inFile(a, 'record-unread', 'w4').rows, { interval: 5, timeout: 10_000 }).toBe(1);
    let answered: ExecOutcome | undefined;
    void written.then((o) => (answered = o));
    // The write's child, then every child sent to read its record (each held, opening the file,
    // by the same checkpoint), is killed.
    let kills = 0;
    for (let last: number | undefined; answered === undefined && kills < 8; kills++) {
      await expect
        .poll(() => answered !== undefined || (pool.status().children[0]?.state === 'running' && pool.pids[0] !== last), { interval: 5, timeout: 10_000 })
        .toBe(true);
      if (answered) break;
      last = pool.pids[0]!;
      // Killed once it is in the statement (it burns no CPU waiting on the lock: a moment, then).
      await new Promise((r) => setTimeout(r, 50));
      process.kill(last, 'SIGKILL');
      await expect.poll(() => answered !== undefined || pool.pids[0] !== last, { interval: 5, timeout: 10_000 }).toBe(true);
    }
    release();
    expect(await written).toMatchObject({
      ok: false,
      error: { code: 'UNAVAILABLE', detail: expect.stringMatching(/whether it committed could not be read/) },
      unsettled: true,
    });
    expect(kills).toBeGreaterThanOrEqual(4);
    // It had committed: a failure would have been a lie. Run again, its record answers.
    expect(await write(a, "INSERT INTO t VALUES ('record-unread', 1)", 'w4')).toMatchObject({ ok: true, replayed: true, result: { changes: 1 } });
    expect(inFile(a, 'record-unread', 'w4')).toEqual({ rows: 1, recorded: true });
  });

  it('runs the next statement on a fresh child when its child was killed while idle', async () => {
    // The statement goes out in the same turn as the kill, before the worker hears of the death:
    // four times, killed before and after the statement is handed to the pool.
    const answers: string[] = [];
    for (let i = 0; i < 4; i++) {
      expect(code(await read(a, 'SELECT 1'))).toBe('ok');
      const pid = pool.pids[0]!;
      let next: Promise<ExecOutcome>;
      if (i % 2 === 0) {
        process.kill(pid, 'SIGKILL');
        next = read(a, 'SELECT count(*) FROM t');
      } else {
        // Stopped first, so it cannot start the statement between its hand-over and the kill: a
        // statement it had begun would answer for the death (UNAVAILABLE: killed from outside), and
        // on a loaded machine one sometimes had (the session-27 proof).
        process.kill(pid, 'SIGSTOP');
        next = read(a, 'SELECT count(*) FROM t');
        process.kill(pid, 'SIGKILL');
      }
      answers.push(code(await next));
    }
    expect(answers).toEqual(['ok', 'ok', 'ok', 'ok']);
  });
});
