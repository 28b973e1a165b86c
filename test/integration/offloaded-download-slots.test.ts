import http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { s3OffloadedApp, type S3OffloadedApp } from '../helpers/s3-offloaded-results.ts';

// Session 30, T7 (a hostile tenant): `GET /v1/results/:id` took no share of anything. Each download
// streams its result from the blob store as fast as its client reads; one whose client reads
// nothing holds a connection of the HTTP process's S3 client (50, the AWS SDK's default), and an
// agent of one workspace holding 50 of them with one 16 MB result left every other workspace's
// download waiting for a connection that never came back.

const BIG = 16 * 1024 * 1024;
let sb: Sandbox;
let app: S3OffloadedApp;
let evilKey: string;
let victimKey: string;
let evilId: string;
let victimId: string;
const held: http.ClientRequest[] = [];

beforeAll(async () => {
  sb = sandbox();
  app = await s3OffloadedApp(sb);
  evilKey = await app.k.agentKey('evil', 'mal', { displayName: 'Mal', settings: { database: 'agent' } });
  victimKey = await app.k.agentKey('victim', 'vic', { displayName: 'Vic', settings: { database: 'agent' } });
  evilId = await app.offload('evil', 'mal', BIG);
  victimId = await app.offload('victim', 'vic', 1000);
}, 60_000);

afterAll(async () => {
  for (const req of held) req.destroy();
  await app?.close();
  await sb.cleanup();
}, 60_000);

it("one workspace's downloads that read nothing leave other workspaces' downloads answered", async () => {
  let answered = 0;
  const statuses: number[] = [];
  for (let i = 0; i < 60; i++) {
    const req = http.get(`${app.base}/v1/results/${evilId}`, { headers: { authorization: `Bearer ${evilKey}` } }, (res) => {
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
  const res = await fetch(`${app.base}/v1/results/${victimId}`, { headers: { authorization: `Bearer ${victimKey}` }, signal: AbortSignal.timeout(15_000) });
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
        await fetch(`${app.base}/v1/results/${evilId}`, { method: 'GET', headers: { authorization: `Bearer ${evilKey}` } }).then(async (r) => {
          await r.body?.cancel();
          return r.status;
        }),
      { interval: 100, timeout: 30_000 },
    )
    .toBe(200);
}, 90_000);
