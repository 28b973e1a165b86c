import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { ExecutorLogger } from '../../src/executor/executor-options.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

// Issue 31: what the child's end mark (`markFinished`) guards, and what any cut of it must keep.
// A child killed from outside once it is idle must not have its last read named as the killer,
// whether that read's answer was all written (the worker reads the channel before it hears of
// the death, its 'close') or was still being written (the end mark says it finished: it runs
// again on the next child). Without the end mark the second answered RESOURCE_LIMIT.

let dataDir: string;
let pool: ExecutorPool;
/** What the pool logged of each death: the call it named, or 'none'. */
const deaths: string[] = [];

const logger: ExecutorLogger = {
  info: () => undefined,
  warn: (_obj, msg) => {
    if (msg === 'executor child exited') deaths.push('none');
  },
  error: (obj, msg) => {
    if (msg === 'executor child died during a statement') deaths.push((obj as { callId?: string }).callId ?? '?');
  },
};

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-end-mark-'));
  pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: 16,
    maxResultBytes: 4 * 1024 * 1024,
    child: builtExecutorChild,
    logger,
  });
  await pool.start();
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const target: DbTarget = { id: 'acme', path: '', shard: 0, limits: PLAN_LIMITS.pro };
const read = (sql: string, callId: string): ExecRequest => ({ op: 'query', db: target, sql, params: [], maxRows: 5000, callId });
const code = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);
const rowsOf = (o: ExecOutcome) => (o.ok ? (o.result as { rows: unknown[] }).rows.length : -1);

/**
 * Sends `req`, then holds this process's loop (so the answer stays unread in the channel, or
 * half written) while the child runs it and goes idle, SIGKILLs the child, and lets go.
 */
async function killedWhileUnread(req: ExecRequest): Promise<{ answer: ExecOutcome; pid: number }> {
  await expect.poll(() => pool.pids[0], { timeout: 10_000 }).toBeDefined();
  const pid = pool.pids[0]!;
  const answer = pool.run(req);
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  // The child runs the read meanwhile (milliseconds), and is idle once it sleeps and its CPU
  // time stands still for 100 ms.
  const until = Date.now() + 5000;
  let last = '';
  let since = Date.now();
  while (Date.now() < until) {
    const [state, cpu] = childState(pid);
    if (state !== 'S' || cpu !== last) [last, since] = [cpu, Date.now()];
    else if (Date.now() - since > 100) break;
  }
  process.kill(pid, 'SIGKILL');
  return { answer: await answer, pid };
}

/** The child's marks (`StatementMarks`): the request started last, when, and the last one marked finished. */
function marksOf(pid: number): number[] {
  // The file is unlinked at once; the child's descriptor (MARKS_FD) still opens it.
  return [...new Float64Array(new Uint8Array(fs.readFileSync(`/proc/${pid}/fd/4`)).buffer, 0, 3)];
}

/** The child's state letter and its user and system CPU ticks, from /proc. */
function childState(pid: number): [string, string] {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return [fields[0]!, `${fields[11]} ${fields[12]}`];
}

describe('a child killed from outside after its read, before the worker read the answer', () => {
  beforeAll(async () => {
    target.path = databasePath(dataDir, 'acme', undefined, 0);
    // 2,000 rows of ~900 bytes: ~1.8 MB, far more than a socket takes at once.
    const made = await pool.run({
      op: 'write',
      db: target,
      sql: "CREATE TABLE leads AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) SELECT i, printf('%.*c', 900, 'v') AS note FROM n",
      params: [],
      callKey: 'acme.@ada.c0',
    });
    expect(code(made)).toBe('ok');
  });

  it('marks no end for small answers, written whole at once', async () => {
    // The end mark is written only when the answer did not reach the socket whole at once (the
    // big read below): a PK read costs the child one system call fewer (issue 31). The child
    // ends each message (its end mark, when written) before it reads the next, so once the last
    // answer is in, every earlier read of the old code had marked its end.
    await expect.poll(() => pool.pids[0], { timeout: 10_000 }).toBeDefined();
    const pid = pool.pids[0]!;
    for (let i = 0; i < 20; i++) expect(code(await pool.run(read('SELECT i FROM leads WHERE i = 1', `w${i}`)))).toBe('ok');
    const [started, , finished] = marksOf(pid);
    expect(started).toBeGreaterThan(20);
    expect(finished).toBeLessThan(started - 1);
    expect(pool.pids[0]).toBe(pid);
  });

  it('answers a small read from the channel, naming no statement', async () => {
    deaths.length = 0;
    const { answer, pid } = await killedWhileUnread(read('SELECT i FROM leads WHERE i = 7', 'small'));
    expect(`${code(answer)}:${rowsOf(answer)}`).toBe('ok:1');
    await expect.poll(() => deaths.length, { timeout: 10_000 }).toBe(1);
    expect(deaths).toEqual(['none']);
    expect(pool.pids[0]).not.toBe(pid);
  });

  it('runs a big read again whose answer was half written, naming no statement', async () => {
    deaths.length = 0;
    const { answer, pid } = await killedWhileUnread(read('SELECT * FROM leads', 'big'));
    expect(`${code(answer)}:${rowsOf(answer)}`).toBe('ok:2000');
    await expect.poll(() => deaths.length, { timeout: 10_000 }).toBe(1);
    expect(deaths).toEqual(['none']);
    expect(pool.pids[0]).not.toBe(pid);
  });
});
