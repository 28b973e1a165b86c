import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { workspaceFeedScope } from '../../src/calls/event-gap-replay.ts';
import { latestEventId, STREAM_MAX_LEN } from '../../src/redis/events.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// The events stream is one for the service, ~20,000 events: a busy workspace's completions turn
// it over in under a minute (session 33, T11). A quiet workspace's runtime that stored its last
// event's id and resumed from it after longer (a deploy) found its approval events gone, and
// the feed went on from the oldest kept event without a word. Now a feed says so
// (`events.missed`), and a feed of one workspace first gives back that workspace's approval
// events of the stretch, and the completion of an approved call that ran in it, from the
// approvals' records.
let sb: Sandbox;
let client: AgentDbClient;
let redis: Redis;
let memberKey = '';
const keys = () => keysFor(sb.config.prefix);
const quiet = { workspace: 'quiet', agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  redis = new Redis(REDIS_URL);
  memberKey = (await new MemberRegistry(redis, keys()).add('quiet', 'ada', 'admin')).key;
}, 60_000);

afterAll(async () => {
  redis?.disconnect();
  await sb?.cleanup();
}, 60_000);

/** A write of `quiet`'s parked, approved and run; its call id. */
async function approvedWrite(table: string): Promise<string> {
  const parked = await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE ${table} (x)` } }, { wait: false });
  expect(parked).toMatchObject({ status: 'awaiting_approval' });
  const { callId, approval } = parked as unknown as { callId: string; approval: { id: string } };
  expect(await client.decide(approval.id, { decision: 'approve', key: memberKey })).toMatchObject({ ok: true });
  expect(await client.result(callId, { workspace: 'quiet', agent: 'scout', wait: true })).toMatchObject({ ok: true });
  return callId;
}

/** A busy workspace's completions, enough to turn the stream over (as its workers publish them). */
async function busyTurnsTheStreamOver(): Promise<string> {
  const p = redis.pipeline();
  for (let i = 0; i < STREAM_MAX_LEN + 2_000; i++) {
    const event = { type: 'call.completed', callId: `b${i}`, workspace: 'busy', agent: 'a', ok: true, at: Date.now() };
    p.xadd(keys().events, 'MAXLEN', '~', STREAM_MAX_LEN, '*', 'type', event.type, 'data', JSON.stringify(event));
  }
  await p.exec();
  return latestEventId(redis, keys().events);
}

/** What a feed gives until `stop` says so, or it reached the stream's newest event `last`. */
async function follow(feed: AsyncIterableIterator<{ id: string; type: string }>, last: string, stop: (e: any) => boolean): Promise<any[]> {
  // By `next()`: leaving a `for await` early would close the feed.
  const seen: any[] = [];
  for (;;) {
    const { value: e, done } = await feed.next();
    if (done) return seen;
    seen.push(e);
    if (stop(e) || e.id === last) return seen;
  }
}

it("gives a quiet workspace's runtime back its approval events trimmed by a busy one, says what it missed, and follows on", async () => {
  // The last event the runtime read before it stopped: its own call's.
  await client.call({ ...quiet, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 0' } });
  const stored = await latestEventId(redis, keys().events);
  expect(stored).not.toBe('0-0');
  const callId = await approvedWrite('t1');
  const last = await busyTurnsTheStreamOver();
  // The runtime's position is gone from the stream, and its events with it.
  const [[oldest]] = (await redis.xrange(keys().events, '-', '+', 'COUNT', 1)) as [string, string[]][];
  expect(oldest! > stored).toBe(true);
  const feed = client.events({ from: stored, workspace: 'quiet' });
  try {
    const seen = await follow(feed, last, (e) => e.type === 'events.missed');
    const mine = seen.filter((e) => e.callId === callId).map((e) => [e.type, e.replayed]);
    expect(mine).toEqual([
      ['approval.requested', true],
      ['approval.decided', true],
      ['call.completed', true],
    ]);
    expect(seen.at(-1)).toMatchObject({ type: 'events.missed', after: stored, before: oldest, givenBack: seen.length - 1 });
    expect(seen.some((e) => e.workspace === 'busy')).toBe(false);
    // Then it follows the stream on, its workspace's events only.
    const next = await client.call({ ...quiet, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
    const after = await follow(feed, 'none', (e) => e.type === 'call.completed');
    expect(after).toMatchObject([{ type: 'call.completed', callId: next.callId, workspace: 'quiet' }]);
    expect(after[0].replayed).toBeUndefined();
  } finally {
    await feed.return!();
  }
}, 120_000);

it('tells a feed of every workspace that events after its position were trimmed before it read them', async () => {
  const stored = await latestEventId(redis, keys().events);
  await approvedWrite('t2');
  const last = await busyTurnsTheStreamOver();
  const feed = client.events({ from: stored });
  try {
    const seen = await follow(feed, last, (e) => e.type === 'events.missed');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ type: 'events.missed', after: stored, givenBack: 0 });
    // Resumed from a position still kept: nothing missed.
    const kept = await latestEventId(redis, keys().events);
    const again = client.events({ from: kept });
    try {
      await client.call({ ...quiet, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 2' } });
      const next = await follow(again, 'none', () => true);
      expect(next[0].type).toBe('call.completed');
    } finally {
      await again.return!();
    }
  } finally {
    await feed.return!();
  }
}, 120_000);

it("bounds what a replay reads of a tenant's approval records: a stretch of many large ones is read up to the bound, the rest said missed", async () => {
  // Each record holds its arguments (up to 64 KiB parked) and effect: 5,000 of each index were read in one pipeline,
  // gigabytes in one reply of the shared Redis for a tenant that parked many in a stretch.
  const many = { ...quiet, workspace: 'many' };
  const from = `${Date.now() - 1}-0`;
  const PARKED = 20;
  for (let i = 0; i < PARKED; i++) {
    const sql = `INSERT INTO t VALUES ('${'x'.repeat(60_000)}', ${i})`;
    const parked = await client.call({ ...many, tool: 'DATA_WRITE_SQL', arguments: { sql } }, { wait: false });
    expect(parked, JSON.stringify(parked).slice(0, 400)).toMatchObject({ status: 'awaiting_approval' });
  }
  const replay = (maxBytes?: number) => workspaceFeedScope(redis, keys(), 'many', maxBytes).replay(from, `${Date.now() + 1}-0`);
  const requested = (events: { type: string }[]) => events.filter((e) => e.type === 'approval.requested').length;
  // Under the bound, every one of them; with a bound of ~5 records' bytes, those read up to it, oldest first.
  expect(requested(await replay())).toBe(PARKED);
  const bounded = await replay(5 * 60_000);
  expect(requested(bounded)).toBeGreaterThan(0);
  expect(requested(bounded)).toBeLessThanOrEqual(6);
}, 120_000);
