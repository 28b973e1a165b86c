import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { AgentDbError } from '../../src/errors.ts';
import { ConcurrentSlots } from '../../src/policy/concurrent-slots.ts';
import { S3BlobStore } from '../../src/blobs/s3-blob-store.ts';
import { spillDir } from '../../src/sqlite/result-spill.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';
import { startS3Server, type S3Server } from '../helpers/s3-server.ts';

// Downloads of offloaded results are bounded per workspace under a process total shared by every
// workspace (32). Four workspaces whose clients read nothing held all of it, first come first
// served, and every other workspace's download was refused (session 35, T15). With the total full,
// a workspace's download now takes the place of the oldest of one holding at least two more: here
// two workspaces hold both places each of a total of 4, and a third's download is answered.

const BIG = 16 * 1024 * 1024;
let sb: Sandbox;
let s3: S3Server;
let store: S3BlobStore;
let k: KeyedApp;
let base: string;
const keys: Record<string, string> = {};
const ids: Record<string, string> = {};
const held: http.IncomingMessage[] = [];

/** Keeps a result of `bytes` of JSON for `workspace`'s agent, as a worker's offload does. */
async function offload(results: OffloadedResults, workspace: string, bytes: number): Promise<string> {
  mkdirSync(spillDir(sb.dataDir), { recursive: true });
  const file = path.join(spillDir(sb.dataDir), `${workspace}.json`);
  writeFileSync(file, JSON.stringify({ columns: ['s'], rows: [['x'.repeat(Math.max(0, bytes - 40))]] }));
  const ref = await results.keep({ file, bytes, rows: 1 } as never, { workspace, agent: 'ag', callId: `${workspace}-1` });
  return ref.id;
}

/** A download's answer, its body unread (paused): it stays under way until read or dropped. */
function startDownload(workspace: string): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/v1/results/${ids[workspace]}`, { headers: { authorization: `Bearer ${keys[workspace]}` } }, (res) => {
      res.pause();
      held.push(res);
      resolve(res);
    });
    req.on('error', reject);
  });
}

/** Reads the answer to its end, and whether it ended complete (false: cut off by the server). */
function readAll(res: http.IncomingMessage): Promise<boolean> {
  return new Promise((resolve) => {
    res.resume();
    res.once('close', () => resolve(res.complete));
  });
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
  // The process's downloads made small (4), refused as download-slots.ts refuses.
  const small = new ConcurrentSlots({ perCaller: 2, perWorkspace: 2, total: 4 }, () => new AgentDbError('RATE_LIMITED', 'full', { retryAfter: 5 }));
  const results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: 3600, downloads: small });
  k = keyedApp(sb, { results });
  for (const ws of ['slowa', 'slowb', 'third']) {
    keys[ws] = await k.agentKey(ws, 'ag', { displayName: 'Ag', settings: { database: 'agent' } });
    ids[ws] = await offload(results, ws, ws === 'third' ? 1000 : BIG);
  }
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);

afterAll(async () => {
  for (const res of held) res.destroy();
  await k.close();
  await store.close();
  await s3.stop();
  await sb.cleanup();
}, 60_000);

it('answers a third workspace’s download while two whose readers take nothing hold every place, cutting off the oldest of theirs', async () => {
  const slow: http.IncomingMessage[] = [];
  for (const ws of ['slowa', 'slowa', 'slowb', 'slowb']) slow.push(await startDownload(ws));
  expect(slow.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);
  const res = await fetch(`${base}/v1/results/${ids.third}`, { headers: { authorization: `Bearer ${keys.third}` }, signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { rows: unknown[] }).rows).toHaveLength(1);
  // The oldest download of a workspace holding the most was cut off: read now, it stops short.
  expect(await readAll(slow[0]!)).toBe(false);
}, 60_000);
