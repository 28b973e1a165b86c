import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// Hostile review T3: the workspace's byte quota was checked only before a step that creates a
// database, so a workspace made its databases while small and then grew each without bound by
// it (six writes took one to 5.5× a 30 MB quota). Scaled down: a 256 KiB quota.
const QUOTA = 256 * 1024;
let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox({ WORKSPACE_MAX_BYTES: String(QUOTA) });
  // Every write walks the folder afresh: the test sees the verdict of the write before it.
  await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
  client = sb.client();
});
afterAll(async () => {
  await sb.cleanup();
});

const as = (workspace: string) => (tool: string, args: Record<string, unknown>) =>
  client.call({ workspace, agent: 'scout', settings: { database: 'agent' }, tool, arguments: args });
const fill = 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) INSERT INTO big SELECT NULL, randomblob(10000) FROM c';

describe('a workspace past its byte quota (WORKSPACE_MAX_BYTES)', () => {
  it('has its writes to databases it already has refused QUOTA_EXCEEDED, writing nothing; reads still work, other workspaces write', async () => {
    const acme = as('acme');
    expect((await acme('DATA_WRITE_SQL', { sql: 'CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)' })).ok).toBe(true);
    // Within the quota when it is asked: this one passes it, with its history.
    expect((await acme('DATA_WRITE_SQL', { sql: fill })).ok).toBe(true);
    const refused = await acme('DATA_WRITE_SQL', { sql: fill });
    expect(refused).toMatchObject({
      ok: false,
      error: { code: 'QUOTA_EXCEEDED', message: expect.stringContaining(`its quota is ${QUOTA} (WORKSPACE_MAX_BYTES`) },
    });
    expect(await acme('DATA_WRITE_SQL', { sql: 'DELETE FROM big WHERE id = 1' })).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    expect(await acme('DATA_QUERY_SQL', { sql: 'SELECT count(*) FROM big' })).toMatchObject({ ok: true, result: { rows: [[40]] } });
    const other = as('other');
    expect((await other('DATA_WRITE_SQL', { sql: 'CREATE TABLE t (v TEXT)' })).ok).toBe(true);
    expect((await other('DATA_WRITE_SQL', { sql: "INSERT INTO t VALUES ('fine')" })).ok).toBe(true);
  });
});

describe('a write already committed, asked again once its workspace is past the quota', () => {
  it('answers what it did (replayed), not QUOTA_EXCEEDED; a new write is refused', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-wsquota-replay-'));
    const pool = await oneChildPool(dataDir);
    try {
      const db = historyTarget(dataDir, 'acme/replay');
      const overQuota = 'writes refused: workspace acme holds 300000 bytes on disk, its quota is 262144';
      expect(await pool.run({ op: 'write', db, sql: 'CREATE TABLE t (v TEXT)', params: [], callKey: 'create' })).toMatchObject({ ok: true });
      expect(await pool.run({ op: 'write', db, sql: "INSERT INTO t VALUES ('a')", params: [], callKey: 'w1' })).toMatchObject({ ok: true });
      expect(await pool.run({ op: 'write', db, sql: "INSERT INTO t VALUES ('a')", params: [], callKey: 'w1', overQuota })).toMatchObject({
        ok: true,
        replayed: true,
      });
      expect(await pool.run({ op: 'write', db, sql: "INSERT INTO t VALUES ('b')", params: [], callKey: 'w2', overQuota })).toMatchObject({
        ok: false,
        error: { code: 'QUOTA_EXCEEDED', detail: overQuota },
      });
      expect(await pool.run({ op: 'query', db, sql: 'SELECT v FROM t', params: [], maxRows: 10 })).toMatchObject({ ok: true, result: { rows: [['a']] } });
    } finally {
      await pool.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('a write that waits for a person, its workspace past its byte quota', () => {
  it('is refused QUOTA_EXCEEDED before it parks: no person is asked to approve a write that cannot run', async () => {
    const parked = as('parked');
    expect((await parked('DATA_WRITE_SQL', { sql: 'CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)' })).ok).toBe(true);
    expect((await parked('DATA_WRITE_SQL', { sql: fill })).ok).toBe(true);
    const gated = { workspace: 'parked', agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };
    const answer = await client.call({ ...gated, tool: 'DATA_WRITE_SQL', arguments: { sql: 'DELETE FROM big WHERE id = 1' } }, { wait: false });
    expect(answer).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    expect(answer).not.toHaveProperty('approval');
  });
});
