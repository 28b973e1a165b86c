import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { spillDir } from '../../src/sqlite/result-spill.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 30, T7 left it, session 31, T8 closed it: downloads of offloaded results were bounded in
// number at once (4 a key), never in bytes over time, nor charged at all: one key pulled the largest
// results again and again, and probed ids for free (each a read of the blob store). A download now
// costs a lookup before the store is asked, and a call per MiB it sends, against the key's and the
// workspace's rates; past them 429 RATE_LIMITED with Retry-After.

const MIB = 1024 * 1024;
let sb: Sandbox;
let k: KeyedApp;
let base: string;
let key: string;
let other: string;
let id: string;

beforeAll(async () => {
  sb = sandbox();
  const results = new OffloadedResults(new FolderBlobStore(path.join(sb.dataDir, 'blobs')), { dataDir: sb.dataDir, ttlS: 3600 });
  // 20 calls a key in the window: 200 points, an 8 MiB download 80 of them.
  k = keyedApp(sb, { results, rateLimits: { windowS: 600, keyCalls: 20 } });
  key = await k.agentKey('pull', 'mal', { displayName: 'Mal', settings: { database: 'agent' } });
  other = await k.agentKey('pull', 'vic', { displayName: 'Vic', settings: { database: 'agent' } });
  mkdirSync(spillDir(sb.dataDir), { recursive: true });
  const file = path.join(spillDir(sb.dataDir), 'big.json');
  writeFileSync(file, JSON.stringify({ columns: ['s'], rows: [['x'.repeat(8 * MIB - 40)]] }));
  id = (await results.keep({ file, bytes: 8 * MIB, rows: 1 } as never, { workspace: 'pull', agent: 'mal', callId: 'big-1' })).id;
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

async function download(bearer: string, which = id): Promise<{ status: number; retryAfter: string | null; text: string }> {
  const r = await fetch(`${base}/v1/results/${which}`, { headers: { authorization: `Bearer ${bearer}` } });
  const text = await r.text();
  return { status: r.status, retryAfter: r.headers.get('retry-after'), text: r.status === 200 ? `${text.length}` : text };
}

it('charges a download by its bytes: past the key’s rate 429 RATE_LIMITED with Retry-After, another key unharmed', async () => {
  const first = await download(key);
  expect(first.status).toBe(200);
  expect(Number(first.text)).toBeGreaterThan(8 * MIB - 100);
  expect(await download(key)).toMatchObject({ status: 200 });
  // 2 × 81 points of 200: the third would pass it.
  const third = await download(key);
  expect(third).toMatchObject({ status: 429, retryAfter: expect.stringMatching(/^\d+$/) });
  expect(third.text).toMatch(/RATE_LIMITED/);
  expect(third.text).toMatch(/a call per MiB/);
  // Another key's rate is its own (the workspace's is 1,200 calls a minute by plan).
  expect(await download(other, 'f'.repeat(32))).toMatchObject({ status: 404 });
});

it('charges an id that is no result as a lookup: probing is refused past the rate', async () => {
  const statuses = new Set<number>();
  for (let i = 0; i < 201; i++) statuses.add((await download(other, i.toString(16).padStart(32, '0'))).status);
  expect([...statuses].sort()).toEqual([404, 429]);
});
