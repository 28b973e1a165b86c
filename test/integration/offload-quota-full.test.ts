import { existsSync, type FSWatcher, mkdirSync, watch, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openBlobStore } from '../../src/blobs/blob-stores.ts';
import type { BlobStore } from '../../src/blobs/blob-store.ts';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { spillDir } from '../../src/sqlite/result-spill.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T14 (session 35): a query past the envelope's size writes its whole result to
// a file in the data folder (up to MAX_OFFLOAD_BYTES, 64 MB) before the workspace's offload quota
// is asked. A workspace at its quota wrote that file and deleted it again on every such query
// (67 MB a query, 10 in 11 s), each metered as a plain query, on the disk every workspace shares.
// Now a refusal is remembered for a while and the workspace's queries write no file meanwhile.

const CAP = 64 * 1024;
let sb: Sandbox;
let k: KeyedApp;
let store: BlobStore;
let acme: string;
let beta: string;
let watcher: FSWatcher | undefined;

beforeAll(async () => {
  sb = sandbox({ MAX_RESULT_BYTES: '4096', MAX_OFFLOAD_BYTES: String(CAP), MAX_OFFLOADED_BYTES_PER_WORKSPACE: String(100 * 1024) });
  await sb.pool();
  store = openBlobStore(sb.config);
  k = keyedApp(sb, { results: new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: sb.config.resultTtlS }) });
  [acme, beta] = await Promise.all([
    k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } }),
    k.agentKey('beta', 'other', { displayName: 'Other', settings: { database: 'agent' } }),
  ]);
});
afterAll(async () => {
  watcher?.close();
  await k.close();
  await store.close();
  await sb.cleanup();
});

const sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) SELECT i, printf('%.10000c','x') AS s FROM c";
async function query(key: string) {
  const res = await k.app.inject({
    method: 'POST',
    url: '/v1/calls',
    headers: { authorization: `Bearer ${key}` },
    payload: { tool: 'DATA_QUERY_SQL', arguments: { sql, max_rows: 1000 } },
  });
  return res.json();
}

it('a workspace found at its offload quota writes no spill file for its next queries, and says why; another workspace still offloads', async () => {
  expect((await query(acme)).result.offloaded).toMatchObject({ capped: true });
  // The quota refuses the second: its file was written, then deleted.
  const refused = await query(acme);
  expect(refused.result.offloaded).toBeUndefined();
  expect(refused.result.note).toMatch(/would pass MAX_OFFLOADED_BYTES_PER_WORKSPACE/);

  // Every file made in the spill folder from now on, in order; the test's own marker last.
  const dir = spillDir(sb.dataDir);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  const made: string[] = [];
  let markerSeen: () => void = () => undefined;
  const marker = new Promise<void>((resolve) => (markerSeen = resolve));
  watcher = watch(dir, (event, name) => {
    if (event !== 'rename' || !name) return;
    if (name === 'marker') markerSeen();
    else made.push(name);
  });
  const again = await query(acme);
  writeFileSync(path.join(dir, 'marker'), '');
  await marker;
  // main: the query wrote its 64 KiB file again, only for the quota to refuse it.
  expect(made).toEqual([]);
  expect(again.ok).toBe(true);
  expect(again.result.truncated).toBe(true);
  expect(again.result.offloaded).toBeUndefined();
  expect(again.result.note).toMatch(/not offloaded: workspace acme's offloaded results hold \d+ bytes, at MAX_OFFLOADED_BYTES_PER_WORKSPACE \(102400\)/);

  // The refusal is acme's: beta's query offloads.
  expect((await query(beta)).result.offloaded).toMatchObject({ capped: true });
});
