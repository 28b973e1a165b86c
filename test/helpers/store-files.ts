import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { dispatch } from '../../src/executor/executor-dispatch.ts';
import type { ChildOptions, DbTarget, ExecOutcome, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS, type PlanLimits } from '../../src/policy/plan-limits.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { type Param, toOpError, write } from '../../src/sqlite/sqlite-ops.ts';

/**
 * The store's operations on database files of one test file's own, without an executor process:
 * a temporary data folder (`prefix` names it) made before the tests and removed after, a handle
 * cache closed after each test, and a database of its own for each `target()`.
 */
export function storeFiles(prefix: string) {
  let dataDir = '';
  let handles: HandleCache | undefined;
  let opts: ChildOptions;
  let n = 0;
  let callSeq = 0;
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    opts = { dataDir, heapLimitMb: 512, handleCacheSize: 16, maxResultBytes: 1024 * 1024 };
  });
  afterEach(() => handles?.closeAll());
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const cache = (): HandleCache => (handles ??= new HandleCache({ size: 16 }));
  /** A fresh call id. */
  const call = () => `call-${++callSeq}`;
  /** A database of its own for each test, named so failures say which. */
  const target = (limits: PlanLimits = PLAN_LIMITS.pro): DbTarget => {
    cache();
    const agent = `a${++n}`;
    return { id: `ws/${agent}`, path: databasePath(dataDir, 'ws', agent, 0), shard: 0, limits };
  };
  /** The write handle of `t`. */
  const writeDb = (t: DbTarget) => cache().open(t, 'write');
  return {
    call,
    target,
    writeDb,
    /** A write of `sql` under a fresh call id, within `t`'s limits. */
    run: (t: DbTarget, sql: string, params: Param[] = []) => write(writeDb(t), sql, params, call(), t.limits),
    /** `req` as the executor child runs it. */
    send: (req: ExecRequest): ExecOutcome => dispatch(cache(), opts, req),
    handles: cache,
    dataDir: () => dataDir,
  };
}

/** The error a call throws, as the executor would report it. */
export function errorOf(fn: () => unknown): { code: string; detail: string } {
  try {
    fn();
  } catch (err) {
    return toOpError(err);
  }
  throw new Error('expected the call to fail');
}

/** Asserts `outcome` failed with `code`; answers its detail. */
export function expectFailed(outcome: ExecOutcome, code: string): string {
  expect(outcome.ok, JSON.stringify(outcome)).toBe(false);
  if (outcome.ok) throw new Error('unreachable');
  expect(outcome.error.code).toBe(code);
  return outcome.error.detail;
}
