import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBlobStore } from '../../src/blobs/blob-stores.ts';
import type { BlobStore } from '../../src/blobs/blob-store.ts';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// The hostile review's query, scaled down: 1,000 rows of 10 KB against a 64 KiB cap.
const CAP = 64 * 1024;
let sb: Sandbox;
let k: KeyedApp;
let store: BlobStore;
let scout: string;

beforeAll(async () => {
  sb = sandbox({ MAX_RESULT_BYTES: '4096', MAX_OFFLOAD_BYTES: String(CAP) });
  await sb.pool();
  store = openBlobStore(sb.config);
  const results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: sb.config.resultTtlS });
  k = keyedApp(sb, { results });
  scout = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
});
afterAll(async () => {
  await k.close();
  await store.close();
  await sb.cleanup();
});

describe('an offloaded result past MAX_OFFLOAD_BYTES', () => {
  it('is cut at the cap: the envelope says so, the stored document is whole JSON within the cap, no temp file is left', async () => {
    const sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) SELECT i, printf('%.10000c','x') AS s FROM c";
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer ${scout}` },
      payload: { tool: 'DATA_QUERY_SQL', arguments: { sql, max_rows: 1000 } },
    });
    const env = res.json();
    expect(env.ok, JSON.stringify(env).slice(0, 300)).toBe(true);
    expect(env.result.offloaded).toMatchObject({ capped: true, maxBytes: CAP });
    expect(env.result.offloaded.bytes).toBeLessThanOrEqual(CAP);
    expect(env.result.offloaded.rows).toBeLessThan(1000);
    expect(env.result.note).toMatch(/cut at 65536 bytes \(MAX_OFFLOAD_BYTES\)/);
    const got = await k.app.inject({ method: 'GET', url: `/v1/results/${env.result.offloaded.id}`, headers: { authorization: `Bearer ${scout}` } });
    expect(got.statusCode).toBe(200);
    expect(Buffer.byteLength(got.body)).toBeLessThanOrEqual(CAP);
    const doc = JSON.parse(got.body);
    expect(doc.rows.length).toBe(env.result.offloaded.rows);
    expect(doc.rows.map((r: unknown[]) => r[0])).toEqual(Array.from({ length: doc.rows.length }, (_, i) => i + 1));
    const tmp = path.join(sb.dataDir, 'tmp', 'results');
    expect(existsSync(tmp) ? readdirSync(tmp) : []).toEqual([]);
  });
});

describe("a workspace's offloaded results past MAX_OFFLOADED_BYTES_PER_WORKSPACE", () => {
  it('are not offloaded once the workspace holds its quota: the preview and a note instead, and another workspace still offloads', async () => {
    // The hostile review repeated one 64 MiB query to fill the blob store; here two capped
    // results of at most 64 KiB fit a 150 KiB quota, and the third does not.
    const sb2 = sandbox({ MAX_RESULT_BYTES: '4096', MAX_OFFLOAD_BYTES: String(CAP), MAX_OFFLOADED_BYTES_PER_WORKSPACE: String(150 * 1024) });
    await sb2.pool();
    const store2 = openBlobStore(sb2.config);
    const k2 = keyedApp(sb2, { results: new OffloadedResults(store2, { dataDir: sb2.dataDir, ttlS: sb2.config.resultTtlS }) });
    try {
      const [a, b] = await Promise.all([
        k2.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } }),
        k2.agentKey('beta', 'other', { displayName: 'Other', settings: { database: 'agent' } }),
      ]);
      const sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) SELECT i, printf('%.10000c','x') AS s FROM c";
      const query = async (key: string) =>
        (
          await k2.app.inject({
            method: 'POST',
            url: '/v1/calls',
            headers: { authorization: `Bearer ${key}` },
            payload: { tool: 'DATA_QUERY_SQL', arguments: { sql, max_rows: 1000 } },
          })
        ).json();
      const first = await query(a);
      const second = await query(a);
      expect([first.result.offloaded?.capped, second.result.offloaded?.capped]).toEqual([true, true]);
      const third = await query(a);
      expect(third.ok, JSON.stringify(third).slice(0, 300)).toBe(true);
      expect(third.result.offloaded).toBeUndefined();
      expect(third.result.note).toMatch(
        /not offloaded: workspace acme's offloaded results hold \d+ bytes, and this one \(\d+\) would pass MAX_OFFLOADED_BYTES_PER_WORKSPACE \(153600\); room comes back from \S+ \(the oldest result's expiry, and a day for the nightly prune to delete it\)/,
      );
      // What to do agrees with when room comes back: main said "run it again once they expire",
      // a day before their room does (session 35, N11).
      expect(third.result.note).not.toContain('once they expire');
      expect(third.result.note).toContain('once room comes back');
      // Nothing of it was uploaded: two results (rows and metadata each) in acme's folder.
      const keys: string[] = [];
      for await (const blob of store2.list('results/acme/')) keys.push(blob.key);
      expect(keys).toHaveLength(4);
      // The quota is the workspace's: another workspace's agent still offloads.
      expect((await query(b)).result.offloaded).toMatchObject({ capped: true });
    } finally {
      await k2.close();
      await store2.close();
      await sb2.cleanup();
    }
  });
});
