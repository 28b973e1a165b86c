import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { S3BlobStore } from '../../src/blobs/s3-blob-store.ts';
import { spillDir } from '../../src/sqlite/result-spill.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';
import { startS3Server, type S3Server } from '../helpers/s3-server.ts';

// Session 30, T7 (a hostile tenant): `GET /v1/results/:id` took no share of anything. Each download
// streams its result from the blob store as fast as its client reads; one whose client reads
// nothing holds a connection of the HTTP process's S3 client (50, the AWS SDK's default), and an
// agent of one workspace holding 50 of them with one 16 MB result left every other workspace's
// download waiting for a connection that never came back.

const BIG = 16 * 1024 * 1024;
let sb: Sandbox;
let s3: S3Server;
let store: S3BlobStore;
let k: KeyedApp;
let base: string;
let evilKey: string;
let victimKey: string;
let evilId: string;
let victimId: string;
const held: http.ClientRequest[] = [];

/** Keeps a result of `bytes` of JSON for `workspace`'s agent, as a worker's offload does. */
async function offload(results: OffloadedResults, workspace: string, agent: string, bytes: number): Promise<string> {
  mkdirSync(spillDir(sb.dataDir), { recursive: true });
  const file = path.join(spillDir(sb.dataDir), `${workspace}.json`);
  const pad = 'x'.repeat(Math.max(0, bytes - 40));
  writeFileSync(file, JSON.stringify({ columns: ['s'], rows: [[pad]] }));
  const ref = await results.keep({ file, bytes, rows: 1 } as never, { workspace, agent, callId: `${workspace}-1` });
  return ref.id;
}

beforeAll(async () => {
  sb = sandbox();
  s3 = await startS3Server();
  store = new S3BlobStore({
    bucket: s3.bucket,
    region: 'us-east-1',
    endpoint: s3.endpoint,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    forcePathStyle: true,
  });
  const results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: 3600 });
  k = keyedApp(sb, { results });
  evilKey = await k.agentKey('evil', 'mal', { displayName: 'Mal', settings: { database: 'agent' } });
  victimKey = await k.agentKey('victim', 'vic', { displayName: 'Vic', settings: { database: 'agent' } });
  evilId = await offload(results, 'evil', 'mal', BIG);
  victimId = await offload(results, 'victim', 'vic', 1000);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);

afterAll(async () => {
  for (const req of held) req.destroy();
  await k.close();
  await store.close();
  await s3.stop();
  await sb.cleanup();
}, 60_000);

it("one workspace's downloads that read nothing leave other workspaces' downloads answered", async () => {
  let answered = 0;
  const statuses: number[] = [];
  for (let i = 0; i < 60; i++) {
    const req = http.get(`${base}/v1/results/${evilId}`, { headers: { authorization: `Bearer ${evilKey}` } }, (res) => {
      statuses.push(res.statusCode ?? 0);
      answered++;
      // Reads nothing more: the download stays open, its stream waiting on this client.
      res.pause();
    });
    req.on('error', () => undefined);
    held.push(req);
  }
  // The first 50 are answered at once, each holding a connection to S3 (with the fix: all 60, most refused).
  await expect.poll(() => answered, { interval: 50, timeout: 30_000 }).toBeGreaterThanOrEqual(50);
  const res = await fetch(`${base}/v1/results/${victimId}`, { headers: { authorization: `Bearer ${victimKey}` }, signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { rows: unknown[] }).rows).toHaveLength(1);
  // The downloads past the workspace's share are refused, saying when to ask again.
  expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(8);
  expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
  // Gone, its downloads give their places back: the same key downloads again.
  for (const req of held.splice(0)) req.destroy();
  await expect
    .poll(
      async () =>
        await fetch(`${base}/v1/results/${evilId}`, { method: 'GET', headers: { authorization: `Bearer ${evilKey}` } }).then(async (r) => {
          await r.body?.cancel();
          return r.status;
        }),
      { interval: 100, timeout: 30_000 },
    )
    .toBe(200);
}, 90_000);
