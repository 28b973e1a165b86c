import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dbTarget } from '../../src/calls/exec-request.ts';
import { loadConfig } from '../../src/config.ts';
import { databasePath } from '../../src/contracts/database-id.ts';
import { dispatch } from '../../src/executor/executor-dispatch.ts';
import type { ChildOptions, DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS, type PlanLimits } from '../../src/policy/plan-limits.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';

// Views and indexes are bounded per database as tables are (session 31, T8: 10,000 views made a
// database's open 206 ms and each DDL's schema check 107 ms; nothing bounded them).

let dataDir: string;
let handles: HandleCache;
let opts: ChildOptions;
let n = 0;
let seq = 0;

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-schema-limits-'));
  opts = { dataDir, heapLimitMb: 512, handleCacheSize: 16, maxResultBytes: 1024 * 1024 };
  handles = new HandleCache({ size: 16 });
});
afterEach(() => handles.closeAll());
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function target(limits: PlanLimits): DbTarget {
  const agent = `a${++n}`;
  return { id: `ws/${agent}`, path: databasePath(dataDir, 'ws', agent, 0), shard: 0, limits };
}

function write(t: DbTarget, sql: string, callKey = `call-${++seq}`): ExecOutcome {
  return dispatch(handles, opts, { op: 'write', db: t, sql, params: [], callKey });
}

function ok(t: DbTarget, sql: string): void {
  const out = write(t, sql);
  expect(out.ok, `${sql}: ${JSON.stringify(out)}`).toBe(true);
}

/** The agent's objects, `type name`, read on the trusted side. */
function names(t: DbTarget): string[] {
  const db = handles.open(t, 'write');
  return db
    .prepare(
      "SELECT type || ' ' || name AS n FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_agentdb\\_%' ESCAPE '\\' ORDER BY 1",
    )
    .pluck()
    .all() as string[];
}

describe('views and indexes per database', () => {
  it('refuses a view past the bound with LIMIT_EXCEEDED, changes nothing, and runs the same call once one is dropped', () => {
    const t = target({ ...PLAN_LIMITS.pro, maxViews: 2 });
    ok(t, 'CREATE TABLE t (x)');
    ok(t, 'CREATE VIEW v1 AS SELECT x FROM t');
    ok(t, 'CREATE VIEW v2 AS SELECT x FROM t');
    const before = names(t);
    const key = 'view-three';
    const out = write(t, 'CREATE VIEW v3 AS SELECT x FROM t', key);
    expect(out).toMatchObject({ ok: false, error: { code: 'LIMIT_EXCEEDED', detail: 'the database may hold 2 views and this would make 3' } });
    expect(names(t)).toEqual(before);
    expect(dispatch(handles, opts, { op: 'drop', db: t, table: 'v1', callKey: `call-${++seq}` }).ok).toBe(true);
    expect(write(t, 'CREATE VIEW v3 AS SELECT x FROM t', key).ok).toBe(true);
    expect(names(t)).toEqual(['table t', 'view v2', 'view v3']);
  });

  it("refuses a CREATE INDEX past the bound; a key's own index is not counted", () => {
    const t = target({ ...PLAN_LIMITS.pro, maxIndexes: 2 });
    ok(t, 'CREATE TABLE t (a UNIQUE, b, c, PRIMARY KEY (b, c))');
    ok(t, 'CREATE INDEX i1 ON t (a, b)');
    ok(t, 'CREATE INDEX i2 ON t (c)');
    const out = write(t, 'CREATE INDEX i3 ON t (b)');
    expect(out).toMatchObject({ ok: false, error: { code: 'LIMIT_EXCEEDED', detail: 'the database may hold 2 indexes and this would make 3' } });
    // A table whose keys make indexes of their own still comes in.
    ok(t, 'CREATE TABLE u (k TEXT PRIMARY KEY, v UNIQUE)');
    expect(names(t).filter((x) => x.startsWith('index '))).toEqual(['index i1', 'index i2']);
  });

  it('lets a database past a lowered bound keep working, but grow no more views', () => {
    const wide = target({ ...PLAN_LIMITS.pro, maxViews: 5 });
    ok(wide, 'CREATE TABLE t (x)');
    for (const v of ['v1', 'v2', 'v3']) ok(wide, `CREATE VIEW ${v} AS SELECT x FROM t`);
    handles.closeAll();
    const narrow: DbTarget = { ...wide, limits: { ...PLAN_LIMITS.pro, maxViews: 1 } };
    ok(narrow, 'INSERT INTO t VALUES (1)');
    ok(narrow, 'CREATE TABLE u (y)');
    ok(narrow, 'ALTER TABLE t ADD COLUMN z');
    expect(write(narrow, 'CREATE VIEW v4 AS SELECT 1')).toMatchObject({ ok: false, error: { code: 'LIMIT_EXCEEDED' } });
    expect(dispatch(handles, opts, { op: 'drop', db: narrow, table: 'v3', callKey: `call-${++seq}` }).ok).toBe(true);
  });

  it('takes its bounds from the plan, or from MAX_VIEWS_PER_DATABASE and MAX_INDEXES_PER_DATABASE', () => {
    const target = { workspace: 'ws', agent: 'a' } as Parameters<typeof dbTarget>[2];
    const plain = dbTarget(loadConfig({ AGENTDB_DATA_DIR: dataDir }), 'ws/a', target, 0, 'pro').limits;
    expect(plain).toMatchObject({ maxTables: 50, maxViews: 500, maxIndexes: 500 });
    expect(dbTarget(loadConfig({ AGENTDB_DATA_DIR: dataDir }), 'ws/a', target, 0, 'enterprise').limits).toMatchObject({ maxViews: 2000, maxIndexes: 2000 });
    const set = loadConfig({ AGENTDB_DATA_DIR: dataDir, MAX_VIEWS_PER_DATABASE: '7', MAX_INDEXES_PER_DATABASE: '9' });
    expect(dbTarget(set, 'ws/a', target, 0, 'enterprise').limits).toMatchObject({ maxTables: 200, maxViews: 7, maxIndexes: 9 });
  });
});
