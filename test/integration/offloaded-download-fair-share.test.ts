import type http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AgentDbError } from '../../src/errors.ts';
import { ConcurrentSlots } from '../../src/policy/concurrent-slots.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { pausedGet, readToEnd } from '../helpers/paused-download.ts';
import { s3OffloadedApp, type S3OffloadedApp } from '../helpers/s3-offloaded-results.ts';

// Downloads of offloaded results are bounded per workspace under a process total shared by every
// workspace (32). Four workspaces whose clients read nothing held all of it, first come first
// served, and every other workspace's download was refused (session 35, T15). With the total full,
// a workspace's download now takes the place of the oldest of one holding at least two more: here
// two workspaces hold both places each of a total of 4, and a third's download is answered.

const BIG = 16 * 1024 * 1024;
let sb: Sandbox;
let app: S3OffloadedApp;
const keys: Record<string, string> = {};
const ids: Record<string, string> = {};
const held: http.IncomingMessage[] = [];

/** A download's answer, its body unread (paused): it stays under way until read or dropped. */
const startDownload = (workspace: string) => pausedGet(`${app.base}/v1/results/${ids[workspace]}`, { authorization: `Bearer ${keys[workspace]}` }, held);

beforeAll(async () => {
  sb = sandbox();
  // The process's downloads made small (4), refused as download-slots.ts refuses.
  const small = new ConcurrentSlots({ perCaller: 2, perWorkspace: 2, total: 4 }, () => new AgentDbError('RATE_LIMITED', 'full', { retryAfter: 5 }));
  app = await s3OffloadedApp(sb, { downloads: small });
  for (const ws of ['slowa', 'slowb', 'third']) {
    keys[ws] = await app.k.agentKey(ws, 'ag', { displayName: 'Ag', settings: { database: 'agent' } });
    ids[ws] = await app.offload(ws, 'ag', ws === 'third' ? 1000 : BIG);
  }
}, 60_000);

afterAll(async () => {
  for (const res of held) res.destroy();
  await app?.close();
  await sb.cleanup();
}, 60_000);

it('answers a third workspace’s download while two whose readers take nothing hold every place, cutting off the oldest of theirs', async () => {
  const slow: http.IncomingMessage[] = [];
  for (const ws of ['slowa', 'slowa', 'slowb', 'slowb']) slow.push(await startDownload(ws));
  expect(slow.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);
  const res = await fetch(`${app.base}/v1/results/${ids.third}`, { headers: { authorization: `Bearer ${keys.third}` }, signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { rows: unknown[] }).rows).toHaveLength(1);
  // The oldest download of a workspace holding the most was cut off: read now, it stops short.
  expect(await readToEnd(slow[0]!)).toBe(false);
}, 60_000);
