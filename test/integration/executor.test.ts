import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool, type ExecutorPoolOptions } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';

let dataDir: string;
const executors: ExecutorPool[] = [];

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-executor-'));
});
afterAll(async () => {
  await Promise.all(executors.map((e) => e.stop()));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

// One child, as the behaviour of each child of a pool (executor-pool.test.ts tests the pool).
async function started(opts: Partial<ExecutorPoolOptions> = {}): Promise<ExecutorPool> {
  const executor = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 10_000,
    heapLimitMb: 512,
    handleCacheSize: 64,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
    ...opts,
  });
  executors.push(executor);
  await executor.start();
  return executor;
}

function db(workspace: string, agent?: string, shard = 0): DbTarget {
  return { id: agent ? `${workspace}/${agent}` : workspace, path: databasePath(dataDir, workspace, agent, shard), shard, limits: PLAN_LIMITS.enterprise };
}

let seq = 0;
const write = (e: ExecutorPool, target: DbTarget, sql: string, params: (string | number)[] = [], extra: { timeoutMs?: number } = {}) =>
  e.run({ op: 'write', db: target, sql, params, callKey: `c${++seq}`, ...extra });
const read = (e: ExecutorPool, target: DbTarget, sql: string, extra: { timeoutMs?: number } = {}) =>
  e.run({ op: 'query', db: target, sql, params: [], maxRows: 100, ...extra });
/** A deadline of its own for what is not the runaway: 300 ms is for those, and a first open on a loaded machine took longer. */
const calm = { timeoutMs: 10_000 };

function code(outcome: ExecOutcome): string {
  return outcome.ok ? 'ok' : outcome.error.code;
}

/** CPU time a process has used, in clock ticks (user + system, from /proc). */
function cpuTicks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('an executor child', () => {
  it('kills a statement past its deadline, restarts, and every database keeps working', async () => {
    const executor = await started({ statementTimeoutMs: 300 });
    const a = db('timeouts', 'a');
    const b = db('timeouts', 'b');
    expect(code(await write(executor, a, 'CREATE TABLE t (x)', [], calm))).toBe('ok');
    expect(code(await write(executor, a, 'INSERT INTO t VALUES (1)', [], calm))).toBe('ok');
    const pid = executor.pids[0]!;

    // Queued behind the runaway statement: it must still be answered, by the next child.
    const [timedOut, queued] = await Promise.all([read(executor, a, FOREVER), read(executor, b, 'SELECT 2 AS two', calm)]);
    expect(timedOut).toEqual({ ok: false, error: { code: 'STATEMENT_TIMEOUT', detail: 'its limit is 300 ms' } });
    expect(queued).toEqual({ ok: true, result: { columns: ['two'], rows: [[2]], truncated: false } });
    expect(executor.pids[0]).not.toBe(pid);
    // The read may be answered by the spare child while the killed one is still being reaped.
    await expect.poll(() => alive(pid)).toBe(false);

    // A write killed while holding the write lock: the lock dies with the child, the data stays.
    const killedWrite = await write(executor, a, `INSERT INTO t ${FOREVER}`);
    expect(code(killedWrite)).toBe('STATEMENT_TIMEOUT');
    expect(await read(executor, a, 'SELECT x FROM t', calm)).toMatchObject({ ok: true, result: { rows: [[1]] } });
    expect(code(await write(executor, a, 'INSERT INTO t VALUES (2)', [], calm))).toBe('ok');
    expect(await read(executor, a, 'SELECT count(*) FROM t', calm)).toMatchObject({ ok: true, result: { rows: [[2]] } });
  });

  it("holds a statement to its own shorter deadline after an idle spell under another's longer one", async () => {
    // The deadline timer armed for the first read is left armed once the child is idle: the
    // runaway must not wait out those ten minutes.
    const executor = await started({ statementTimeoutMs: 600_000 });
    const a = db('timeouts', 'idle');
    expect(code(await read(executor, a, 'SELECT 1'))).toBe('ok');
    expect(await read(executor, a, FOREVER, { timeoutMs: 300 })).toEqual({ ok: false, error: { code: 'STATEMENT_TIMEOUT', detail: 'its limit is 300 ms' } });
    expect(code(await read(executor, a, 'SELECT 1'))).toBe('ok');
  });

  it('lets a statement run to its own longer deadline after an idle spell under a shorter one', async () => {
    const executor = await started({ statementTimeoutMs: 300 });
    const a = db('timeouts', 'idle-long');
    expect(code(await read(executor, a, 'SELECT 1', calm))).toBe('ok');
    expect(code(await read(executor, a, 'SELECT 1'))).toBe('ok');
    // Armed for 300 ms above and left armed: firing during this statement, it waits out the rest
    // of this one's deadline instead of killing it.
    const counted = await read(
      executor,
      a,
      'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 5000000) SELECT count(*) AS n FROM c',
      calm,
    );
    expect(counted).toMatchObject({ ok: true, result: { rows: [[5000000]] } });
  });

  it('answers UNAVAILABLE, not RESOURCE_LIMIT, when the child is SIGKILLed from outside mid-statement, and goes on', async () => {
    const executor = await started();
    const target = db('crashes', 'a');
    const pid = executor.pids[0]!;
    const pending = read(executor, target, FOREVER);
    const next = read(executor, target, 'SELECT 1 AS one');
    // Killed once it burns CPU on the statement: killed before it read it, the statement would
    // rightly run on the next child instead (see executor-child-death.test.ts).
    const before = cpuTicks(pid);
    await expect.poll(() => cpuTicks(pid) - before, { interval: 5, timeout: 10_000 }).toBeGreaterThanOrEqual(5);
    process.kill(pid, 'SIGKILL');
    const outcome = await pending;
    expect(outcome).toEqual({
      ok: false,
      error: { code: 'UNAVAILABLE', detail: expect.stringMatching(/killed from outside \(signal SIGKILL.*nothing was changed/) },
    });
    expect(await next).toEqual({ ok: true, result: { columns: ['one'], rows: [[1]], truncated: false } });
    expect(executor.pids[0]).not.toBe(pid);
  });

  it('outlives SIGINT and SIGTERM sent to the whole process group, ending only with its worker', async () => {
    const executor = await started();
    const pid = executor.pids[0]!;
    process.kill(pid, 'SIGINT');
    process.kill(pid, 'SIGTERM');
    expect(await read(executor, db('signals', 'a'), 'SELECT 1 AS one')).toMatchObject({ ok: true });
    expect(executor.pids[0]).toBe(pid);
  });

  it('stops a huge allocation with RESOURCE_LIMIT; the worker lives on', async () => {
    const executor = await started();
    const target = db('memory', 'a');
    expect(code(await read(executor, target, 'SELECT randomblob(900000000)'))).toBe('RESOURCE_LIMIT');
    expect(code(await read(executor, target, 'SELECT length(randomblob(900000000))'))).toBe('RESOURCE_LIMIT');
    expect(alive(process.pid)).toBe(true);
    expect(await read(executor, target, 'SELECT 1 AS one')).toMatchObject({ ok: true });
  });

  it('caps the memory one statement may take, even under SQLite length limits', async () => {
    // Three strings of 400 MB each are each within SQLite's length limit, but together they pass
    // a 16 MiB heap allowance (plus Node's own) by far: the child's data limit stops them.
    const executor = await started({ heapLimitMb: 16 });
    const target = db('memory', 'b');
    const big = (n: number) => `(SELECT length(group_concat(printf('%.*c', 1000000, '${n}'), '')) FROM c)`;
    const sql = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 400) SELECT ${big(1)}, ${big(2)}, ${big(3)}`;
    expect(code(await read(executor, target, sql))).toBe('RESOURCE_LIMIT');
    expect(await read(executor, target, 'SELECT 1 AS one')).toMatchObject({ ok: true });
  });

  it('sorts and indexes past the page cache without a temporary file outside the data folder', async () => {
    // SQLite names its spill files in SQLITE_TMPDIR and unlinks them at once; watching the
    // folder is the way to see one was ever made.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-sqlite-tmp-'));
    const before = process.env.SQLITE_TMPDIR;
    process.env.SQLITE_TMPDIR = tmp;
    const made: string[] = [];
    const watcher = fs.watch(tmp, (_event, name) => made.push(String(name)));
    try {
      const e = await started();
      const target = db('spill', 'sorter');
      // About 8 MB of rows, well past the 1 MiB page cache a handle keeps.
      const rows = 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i, hex(randomblob(40)) FROM n';
      expect(code(await write(e, target, `CREATE TABLE big AS ${rows}`))).toBe('ok');
      const sorted = await e.run({ op: 'query', db: target, sql: 'SELECT * FROM big ORDER BY 2 LIMIT 3', params: [], maxRows: 3 });
      expect(code(sorted)).toBe('ok');
      expect(code(await read(e, target, `SELECT count(DISTINCT "hex(randomblob(40))") FROM big`))).toBe('ok');
      expect(code(await write(e, target, 'CREATE INDEX big_hex ON big ("hex(randomblob(40))")'))).toBe('ok');
      // The child has answered; let any pending watch event arrive before judging.
      await new Promise((resolve) => setImmediate(resolve));
      expect(made).toEqual([]);
    } finally {
      watcher.close();
      if (before === undefined) delete process.env.SQLITE_TMPDIR;
      else process.env.SQLITE_TMPDIR = before;
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('writes four hundred databases through a cache of 16 handles with bounded open files', async () => {
    // 25 databases a handle: every one is evicted many times over (the bench reports memory after 10,000).
    const executor = await started({ handleCacheSize: 16 });
    // The descriptors of files in the data folder: the child's own (its channel, the threads it
    // starts as it runs, such as its parent watch at the first request) are not what is bounded.
    const fdDir = `/proc/${executor.pids[0]}/fd`;
    const openFiles = () =>
      fs.readdirSync(fdDir).filter((fd) => {
        try {
          return fs.readlinkSync(path.join(fdDir, fd)).startsWith(dataDir);
        } catch {
          return false; // closed between the listing and the read
        }
      }).length;
    const baseline = openFiles();
    let most = baseline;
    const total = 400;
    const batch = 200;
    for (let start = 0; start < total; start += batch) {
      const outcomes = await Promise.all(
        Array.from({ length: batch }, (_, k) => {
          const i = start + k;
          return write(executor, db(`w${i % 100}`, `a${i}`, i % 16), 'CREATE TABLE t (i INTEGER)');
        }),
      );
      expect(outcomes.filter((o) => !o.ok)).toEqual([]);
      most = Math.max(most, openFiles());
    }
    // A WAL database holds three descriptors (file, -wal, -shm); 16 handles, and one more from
    // a miss's answer until the child closes the least recently used (`HandleCache.settle`).
    expect(most - baseline).toBeLessThanOrEqual((16 + 1) * 3);
    expect(await executor.run({ op: 'describe', db: db('w7', 'a307', 307 % 16) })).toMatchObject({
      ok: true,
      result: { tables: [{ name: 't', rowCount: 0 }] },
    });
    // Creating four hundred files (each with a WAL switch and a checkpoint on close) is bound by
    // the disk; this is a generous ceiling for a loaded CI machine, not a performance check.
  }, 300_000);

  it('closes handles of evicted shards', async () => {
    const executor = await started();
    expect(code(await write(executor, db('evict', 'a', 3), 'CREATE TABLE t (x)'))).toBe('ok');
    expect(code(await write(executor, db('evict', 'b', 4), 'CREATE TABLE t (x)'))).toBe('ok');
    expect(await executor.run({ op: 'evict', shards: [3, 9] })).toEqual({ ok: true, result: { closed: 1 } });
  });

  it("records a write's activity row with its own SQL when the note leaves the statement out, as the worker sends it", async () => {
    const executor = await started();
    const target = db('noted', 'a');
    const sql = "INSERT INTO t VALUES ('x')";
    expect(code(await write(executor, target, 'CREATE TABLE t (x)'))).toBe('ok');
    const activity = { tool: 'DATA_WRITE_SQL', by: 'agent:a', callId: 'w1' };
    expect(code(await executor.run({ op: 'write', db: target, sql, params: [], callKey: 'noted.a.w1', activity }))).toBe('ok');
    // A note that names its statement keeps it (a caller other than the worker's call runner).
    const named = { ...activity, callId: 'w2', statement: 'named' };
    expect(code(await executor.run({ op: 'write', db: target, sql, params: [], callKey: 'noted.a.w2', activity: named }))).toBe('ok');
    const listed = await executor.run({ op: 'activity', db: target });
    const seqs = (listed as { result: { seq: number; kind: string }[] }).result.filter((r) => r.kind === 'call').map((r) => r.seq);
    const rows = await executor.run({ op: 'activity', db: target, seqs });
    const calls = (rows as { result: { callId: string | null; statement: string | null; statementBytes: number | null }[] }).result.filter((r) => r.callId);
    expect(calls.map((r) => [r.callId, r.statement, r.statementBytes])).toEqual([
      ['w1', sql, sql.length],
      ['w2', 'named', 5],
    ]);
  });

  it('stops: answers what waits, refuses what comes, and the child exits', async () => {
    const executor = await started();
    const pid = executor.pids[0]!;
    const target = db('stopping', 'a');
    const inFlight = read(executor, target, 'SELECT 1 AS one');
    const stopping = executor.stop();
    expect(await inFlight).toMatchObject({ ok: true });
    await stopping;
    expect(alive(pid)).toBe(false);
    expect(await read(executor, target, 'SELECT 1')).toEqual({ ok: false, error: { code: 'UNAVAILABLE', detail: 'the executor is stopped' } });
  });
});
