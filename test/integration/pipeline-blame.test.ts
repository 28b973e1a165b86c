import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { ExecutorLogger } from '../../src/executor/executor-options.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';

// Issue 25, review 16b: statements of one database are pipelined to one child, and a child
// answers a batch every 5 ms or at its end. When another caller's statement kills the child,
// only that statement answers for it: one that had finished (its answer still in the child,
// or still being written to the channel) is run again on the next child, or, a write, answered
// from its exactly-once record; the killer is answered RESOURCE_LIMIT once and not run again.

/** Asks for a 300 MB string: V8 aborts the child (SIGABRT) under its memory limit. */
const KILLER = "SELECT printf('%.*c', 300000000, 'x')";
const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
const ROUNDS = 5;
/** The variants: each round costs a child (and a respawn), seconds on a loaded 2-core host. */
const FEWER = 3;

let dataDir: string;
let pool: ExecutorPool;
/** Child deaths the pool logged, with the call it charged for each. */
const deaths: string[] = [];

const logger: ExecutorLogger = {
  info: () => undefined,
  warn: () => undefined,
  error: (obj, msg) => {
    if (msg === 'executor child died during a statement') deaths.push((obj as { callId?: string }).callId ?? '?');
  },
};

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-blame-'));
  pool = new ExecutorPool({
    size: 2,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 30_000,
    // Room for SQLite to build the killer's string: V8 then aborts the child copying it.
    heapLimitMb: 512,
    handleCacheSize: 16,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
    logger,
  });
  await pool.start();
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function db(workspace: string): DbTarget {
  return { id: workspace, path: databasePath(dataDir, workspace, undefined, 0), shard: 0, limits: PLAN_LIMITS.pro };
}

const run = (req: ExecRequest) => pool.run(req);
const read = (target: DbTarget, sql: string, callId: string): ExecRequest => ({ op: 'query', db: target, sql, params: [], maxRows: 1000, callId });
const killer = (target: DbTarget, callId: string): ExecRequest => read(target, KILLER, callId);
const code = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);
const rowsOf = (o: ExecOutcome) => (o.ok ? (o.result as { rows: unknown[] }).rows.length : -1);

describe('a statement that kills its child behind another caller’s finished one', () => {
  let shared: DbTarget;

  beforeAll(async () => {
    shared = db('acme');
    // 900 rows of ~900 bytes: a read of them all answers ~850 KB, which the child is still
    // writing to its channel when it starts the next statement.
    const made = await run({
      op: 'write',
      db: shared,
      sql: "CREATE TABLE leads AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 900) SELECT i, printf('%.*c', 900, 'v') AS note FROM n",
      params: [],
      callKey: 'acme.@ada.c0',
    });
    expect(code(made)).toBe('ok');
    expect(code(await run({ op: 'write', db: shared, sql: 'CREATE TABLE t (v)', params: [], callKey: 'acme.@ada.c1' }))).toBe('ok');
  });

  it('answers a big read sent in the same tick as the killer, and charges only the killer, once', async () => {
    deaths.length = 0;
    const answers: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const victim = run(read(shared, 'SELECT * FROM leads', `big-${round}`));
      const bomb = run(killer(shared, `bomb-${round}`));
      const [v, b] = await Promise.all([victim, bomb]);
      answers.push(`${code(v)}:${rowsOf(v)} ${code(b)}`);
    }
    expect(answers).toEqual(Array.from({ length: ROUNDS }, () => 'ok:900 RESOURCE_LIMIT'));
    // One child per killer: it was not run again on the next child.
    expect(deaths).toEqual(Array.from({ length: ROUNDS }, (_, round) => `bomb-${round}`));
  });

  it('answers a big read when the killer comes in a later message', async () => {
    deaths.length = 0;
    const answers: string[] = [];
    for (let round = 0; round < FEWER; round++) {
      const victim = run(read(shared, 'SELECT * FROM leads', `big-late-${round}`));
      await new Promise((r) => setImmediate(r));
      const bomb = run(killer(shared, `bomb-late-${round}`));
      const [v, b] = await Promise.all([victim, bomb]);
      answers.push(`${code(v)}:${rowsOf(v)} ${code(b)}`);
    }
    expect(answers).toEqual(Array.from({ length: FEWER }, () => 'ok:900 RESOURCE_LIMIT'));
    expect(deaths).toEqual(Array.from({ length: FEWER }, (_, round) => `bomb-late-${round}`));
  });

  it('answers a small read pipelined in one message with the killer', async () => {
    deaths.length = 0;
    const answers: string[] = [];
    for (let round = 0; round < FEWER; round++) {
      // The first read takes the line's child; the two behind it go out together, in one message.
      const first = run(read(shared, 'SELECT count(*) FROM leads', `first-${round}`));
      const victim = run(read(shared, 'SELECT count(*) FROM leads', `small-${round}`));
      const bomb = run(killer(shared, `bomb-small-${round}`));
      const [f, v, b] = await Promise.all([first, victim, bomb]);
      answers.push(`${code(f)} ${code(v)}:${v.ok ? JSON.stringify((v.result as { rows: unknown[] }).rows) : ''} ${code(b)}`);
    }
    expect(answers).toEqual(Array.from({ length: FEWER }, () => 'ok ok:[[900]] RESOURCE_LIMIT'));
    expect(deaths).toEqual(Array.from({ length: FEWER }, (_, round) => `bomb-small-${round}`));
  });

  it('answers a write pipelined with the killer with what it committed, once, not as a replay', async () => {
    deaths.length = 0;
    const answers: string[] = [];
    for (let round = 0; round < FEWER; round++) {
      const first = run(read(shared, 'SELECT count(*) FROM t', `w-first-${round}`));
      const written = run({ op: 'write', db: shared, sql: 'INSERT INTO t VALUES (?)', params: [round], callKey: `acme.@ada.w${round}`, callId: `w${round}` });
      const bomb = run(killer(shared, `bomb-w-${round}`));
      const [, w, b] = await Promise.all([first, written, bomb]);
      // Not `replayed`: the caller never had an answer, and a replayed write is not metered.
      answers.push(`${code(w)}:${w.ok ? (w.result as { changes: number }).changes : ''}:${w.ok && w.replayed ? 'replayed' : 'first'} ${code(b)}`);
    }
    expect(answers).toEqual(Array.from({ length: FEWER }, () => 'ok:1:first RESOURCE_LIMIT'));
    expect(deaths).toEqual(Array.from({ length: FEWER }, (_, round) => `bomb-w-${round}`));
    const file = new Database(shared.path, { readonly: true });
    try {
      expect(file.prepare('SELECT v FROM t ORDER BY v').pluck().all()).toEqual(Array.from({ length: FEWER }, (_, round) => round));
    } finally {
      file.close();
    }
  });

  it('charges a runaway behind a finished big read with its deadline, and answers the read', async () => {
    const answers: string[] = [];
    for (let round = 0; round < 2; round++) {
      const victim = run({ ...read(shared, 'SELECT * FROM leads', `big-slow-${round}`), timeoutMs: 2000 });
      const runaway = run({ ...read(shared, FOREVER, `runaway-${round}`), timeoutMs: 2000 });
      const [v, r] = await Promise.all([victim, runaway]);
      answers.push(`${code(v)}:${rowsOf(v)} ${code(r)}`);
    }
    expect(answers).toEqual(['ok:900 STATEMENT_TIMEOUT', 'ok:900 STATEMENT_TIMEOUT']);
  });
});
