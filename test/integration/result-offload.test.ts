import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBlobStore } from '../../src/blobs/blob-stores.ts';
import type { BlobStore } from '../../src/blobs/blob-store.ts';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// The smallest MAX_RESULT_BYTES, so a few hundred rows of 100 bytes pass it.
let sb: Sandbox;
let k: KeyedApp;
let store: BlobStore;
let clock = 0;
let results: OffloadedResults;
const key: Record<string, string> = {};

const ROWS = 500;
const row = (i: number) => [i, `row ${i} ${'x'.repeat(90)}`, i % 7 === 0 ? null : i * 1.5];

beforeAll(async () => {
  sb = sandbox({ MAX_RESULT_BYTES: '4096', RESULT_TTL_HOURS: '1' });
  await sb.pool();
  store = openBlobStore(sb.config);
  results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: sb.config.resultTtlS, now: () => clock || Date.now() });
  k = keyedApp(sb, { results });
  key.scout = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  key.other = await k.agentKey('acme', 'other', { displayName: 'Other', settings: { database: 'agent' } });
  key.ada = await k.memberKey('acme', 'ada', 'member');
  key.eve = await k.memberKey('evil', 'eve', 'admin');
  key.evilScout = await k.agentKey('evil', 'scout', { displayName: 'Scout elsewhere', settings: { database: 'agent' } });
  await call(key.scout, 'DATA_WRITE_SQL', { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, r REAL)' });
  for (let i = 0; i < ROWS; i += 25) {
    const batch = Array.from({ length: 25 }, (_, j) => row(i + j));
    await call(key.scout, 'DATA_WRITE_SQL', { sql: `INSERT INTO t VALUES ${batch.map(() => '(?,?,?)').join(',')}`, params: batch.flat() });
  }
});
afterAll(async () => {
  await k.close();
  await store.close();
  await sb.cleanup();
});

async function call(bearer: string, tool: string, args: Record<string, unknown>) {
  const res = await k.app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: `Bearer ${bearer}` }, payload: { tool, arguments: args } });
  const body = res.json();
  expect(body.ok, JSON.stringify(body).slice(0, 300)).toBe(true);
  return body;
}
const fetchResult = (bearer: string, id: string) => k.app.inject({ method: 'GET', url: `/v1/results/${id}`, headers: { authorization: `Bearer ${bearer}` } });

describe('a query result past MAX_RESULT_BYTES', () => {
  let offloaded: { id: string; bytes: number; rows: number; expiresAt: string };

  it('is offloaded whole: the envelope carries a preview within the limit and a reference', async () => {
    const env = await call(key.scout, 'DATA_QUERY_SQL', { sql: 'SELECT id, s, r FROM t ORDER BY id', max_rows: 1000 });
    expect(Buffer.byteLength(JSON.stringify(env))).toBeLessThanOrEqual(4096);
    expect(env.result).toMatchObject({ columns: ['id', 's', 'r'], truncated: true, oversize: true });
    expect(env.result.rows.length).toBeGreaterThan(0);
    expect(env.result.rows.length).toBeLessThan(ROWS);
    expect(env.result.rows).toEqual(Array.from({ length: env.result.rows.length }, (_, i) => row(i)));
    offloaded = env.result.offloaded;
    expect(offloaded).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), rows: ROWS });
    expect(Date.parse(offloaded.expiresAt) - Date.now()).toBeGreaterThan(3500_000);
    // The executor's temp file went to the store and is gone.
    const tmp = path.join(sb.dataDir, 'tmp', 'results');
    expect(existsSync(tmp) ? readdirSync(tmp) : []).toEqual([]);
  });

  it('is read back whole by the agent whose call it was, and by a member of its workspace', async () => {
    const expected = { columns: ['id', 's', 'r'], rows: Array.from({ length: ROWS }, (_, i) => row(i)) };
    for (const bearer of [key.scout, key.ada]) {
      const res = await fetchResult(bearer, offloaded.id);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toContain('application/json');
      expect(Buffer.byteLength(res.body)).toBe(offloaded.bytes);
      expect(res.json()).toEqual(expected);
    }
  });

  it('is never read by another workspace, nor by another agent of its own', async () => {
    for (const bearer of [key.eve, key.evilScout, key.other]) {
      const res = await fetchResult(bearer, offloaded.id);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
    }
    expect((await fetchResult(key.ada, '0'.repeat(32))).statusCode).toBe(404);
    expect((await fetchResult(key.ada, '../../etc')).statusCode).toBe(404);
    expect((await k.app.inject({ method: 'GET', url: `/v1/results/${offloaded.id}` })).statusCode).toBe(401);
  });

  it('keeps at most max_rows rows', async () => {
    const env = await call(key.scout, 'DATA_QUERY_SQL', { sql: 'SELECT id, s FROM t ORDER BY id', max_rows: 120 });
    expect(env.result.offloaded.rows).toBe(120);
    const res = await fetchResult(key.scout, env.result.offloaded.id);
    expect(res.json().rows).toEqual(Array.from({ length: 120 }, (_, i) => row(i).slice(0, 2)));
  });

  it('a result that fits is not offloaded', async () => {
    const env = await call(key.scout, 'DATA_QUERY_SQL', { sql: 'SELECT id FROM t ORDER BY id', max_rows: 5 });
    expect(env.result).toEqual({ columns: ['id'], rows: [[0], [1], [2], [3], [4]], truncated: true });
  });

  it('answers with the preview and says so when the blob store fails, leaving no file behind', async () => {
    const broken = await k.agentKey('broken', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    await call(broken, 'DATA_WRITE_SQL', { sql: 'CREATE TABLE t (s TEXT)' });
    // The folder store cannot make the workspace's folder: a file stands where it would go.
    mkdirSync(path.join(sb.dataDir, 'blobs', 'results'), { recursive: true });
    writeFileSync(path.join(sb.dataDir, 'blobs', 'results', 'broken'), 'in the way');
    const env = await call(broken, 'DATA_QUERY_SQL', {
      sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) SELECT i, printf('%.100c', 'q') FROM n",
      max_rows: 1000,
    });
    expect(env.result).toMatchObject({ truncated: true, oversize: true, note: expect.stringContaining('could not be offloaded') });
    expect(env.result.offloaded).toBeUndefined();
    expect(env.result.rows.length).toBeGreaterThan(0);
    expect(readdirSync(path.join(sb.dataDir, 'tmp', 'results'))).toEqual([]);
    rmSync(path.join(sb.dataDir, 'blobs', 'results', 'broken'));
  });

  it('expires with RESULT_TTL_HOURS: a read past expiry answers RESULT_EXPIRED, and the prune deletes it', async () => {
    clock = Date.parse(offloaded.expiresAt) + 1000;
    try {
      const res = await fetchResult(key.scout, offloaded.id);
      expect(res.statusCode).toBe(410);
      expect(res.json()).toMatchObject({ error: { code: 'RESULT_EXPIRED' } });
      expect(await results.prune()).toBeGreaterThanOrEqual(2);
      const keys: string[] = [];
      for await (const b of store.list('results/')) keys.push(b.key);
      expect(keys).toEqual([]);
      expect((await fetchResult(key.scout, offloaded.id)).statusCode).toBe(404);
    } finally {
      clock = 0;
    }
  });
});
