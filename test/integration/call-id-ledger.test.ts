import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { CallIdLedger, PRUNE_BATCH } from '../../src/calls/call-id-ledger.ts';
import { CALL_ID_LEDGER_DIR } from '../../src/contracts/database-id.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import { shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A call id after Redis came back empty (no AOF): its claim in Redis is gone. Before the call-id
// ledger, a call under a used id that reached another database (another scope: another file,
// on another shard, here another worker), or a read (no exactly-once record), ran as a new call
// and took the id; the first call's own re-send was then refused IDEMPOTENCY_CONFLICT although it
// had run. Two worker pools, one per shard, as two worker processes would own them.

let own: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
const settings = { database: 'workspace' as const, sharedData: true };
const who = { workspace: 'acme', agent: 'scout', settings };
const insert = (callId: string, v: string, scope?: 'workspace'): CallInput => ({
  ...who,
  callId,
  tool: 'DATA_WRITE_SQL',
  arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [v], ...(scope ? { scope } : {}) },
});
const read = (callId: string): CallInput => ({ ...who, callId, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t' } });

async function rows(scope?: 'workspace'): Promise<unknown[][]> {
  const got = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t ORDER BY rowid', ...(scope ? { scope } : {}) } });
  expect(got).toMatchObject({ ok: true });
  return (got as unknown as { result: { rows: unknown[][] } }).result.rows;
}

async function redisComesBackEmpty(): Promise<void> {
  await own.kill();
  own.wipe();
  await own.start();
}

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ SHARD_COUNT: '2', REDIS_URL: own.url });
  // The agent's database and the workspace's shared one on different shards, so different pools.
  expect(shardOf('acme/scout', 2)).not.toBe(shardOf('acme', 2));
  await sb.pool([0]);
  await sb.pool([1]);
  client = sb.client();
  for (const scope of [undefined, 'workspace'] as const) {
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)', ...(scope ? { scope } : {}) } })).toMatchObject({
      ok: true,
    });
  }
}, 60_000);
afterAll(async () => {
  await sb.cleanup();
  await own.remove();
});

describe('a call id used before Redis came back empty', () => {
  it('a write into the agent’s database, then the id for a write into the shared one: refused, and the first call’s re-send answers it', async () => {
    const first = await client.call(insert('X', 'first'));
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });
    await redisComesBackEmpty();

    const other = insert('X', 'other', 'workspace');
    expect(await client.call(other)).toMatchObject({
      ok: false,
      callId: 'X',
      error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining('in database acme/scout') },
    });
    // The first call sent again answers what it did: its write, once.
    expect(await client.call(insert('X', 'first'))).toEqual(first);
    expect(await client.result('X', who)).toEqual(first);
    // The refused call sent again stays refused; the id stays the first call's.
    expect(await client.call(other)).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await client.call(read('X'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows()).toEqual([['first']]);
    expect(await rows('workspace')).toEqual([]);
  });

  it('a read, then the id for a write: refused, nothing written, and the read sent again answers', async () => {
    const first = await client.call(read('R'));
    expect(first).toMatchObject({ ok: true, result: { rows: [[1]] } });
    await redisComesBackEmpty();

    expect(await client.call(insert('R', 'not a read'))).toMatchObject({
      ok: false,
      error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining('in database acme/scout') },
    });
    // A read keeps no result outside Redis: sent again it runs again (it changes nothing), and
    // finds nothing written under its id.
    expect(await client.call(read('R'))).toMatchObject({ ok: true, result: { rows: [[1]] } });
    expect(await client.call(insert('R', 'not a read'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await client.call(insert('R', 'shared', 'workspace'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows()).toEqual([['first']]);
    expect(await rows('workspace')).toEqual([]);
  });

  it('a write into the shared database sent again first, after the restart: its outcome, once; then another call is refused', async () => {
    const first = await client.call(insert('S', 'shared', 'workspace'));
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });
    await redisComesBackEmpty();

    expect(await client.call(insert('S', 'shared', 'workspace'))).toEqual(first);
    expect(await client.call(insert('S', 'mine'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows('workspace')).toEqual([['shared']]);
    expect(await rows()).toEqual([['first']]);
  });
});

describe('a call id used before the ledger existed', () => {
  it('is kept by the database’s record: another write is refused, and the first call sent again answers it', async () => {
    const first = await client.call(insert('P', 'before the ledger'));
    expect(first).toMatchObject({ ok: true });
    // As a call made before the ledger existed left it: no entry.
    const file = new Database(path.join(sb.dataDir, CALL_ID_LEDGER_DIR, 'acme.sqlite'));
    expect(file.prepare("DELETE FROM call_ids WHERE key = 'acme.scout.P'").run().changes).toBe(1);
    file.close();
    await redisComesBackEmpty();

    expect(await client.call(insert('P', 'another'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await client.call(insert('P', 'before the ledger'))).toEqual(first);
    expect(await client.call(insert('P', 'another'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows()).toEqual([['first'], ['before the ledger']]);
  });
});

describe('the call-id ledger file', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-ledger-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const a = { shard: 0, database: 'w/a', fingerprint: 'fa' };
  const b = { shard: 1, database: 'w', fingerprint: 'fb' };

  it('keeps an id for its first call, across handles, until its retention passes', () => {
    const one = new CallIdLedger({ dataDir, retentionMs: 1000 });
    const two = new CallIdLedger({ dataDir, retentionMs: 1000, maxOpen: 1 });
    try {
      expect(one.take('w', 'w.a.1', a, 10_000, 10_000)).toBeUndefined();
      expect(one.take('w', 'w.a.1', a, 10_500, 10_500)).toBeUndefined();
      expect(two.take('w', 'w.a.1', b, 10_600, 10_600)).toEqual(a);
      // Another workspace's file, then this one again: reopened (one open at most).
      expect(two.take('v', 'v.a.1', b, 10_600, 10_600)).toBeUndefined();
      expect(two.take('w', 'w.a.1', b, 10_700, 10_700)).toEqual(a);
      // Past the retention of the first call's enqueue time: the id is free again.
      expect(two.take('w', 'w.a.1', b, 11_001, 11_001)).toBeUndefined();
      expect(one.take('w', 'w.a.1', a, 11_002, 11_002)).toEqual(b);
    } finally {
      one.close();
      two.close();
    }
  });

  it('deletes a backlog of expired entries a batch per take, never all in one take', () => {
    // A take runs on the worker's event loop: 200,000 expired entries deleted at once held it
    // 1.3 s (a workspace quiet past its retention after a burst), stalling every tenant there.
    const ledger = new CallIdLedger({ dataDir, retentionMs: 1000 });
    const count = () => {
      const file = new Database(path.join(dataDir, CALL_ID_LEDGER_DIR, 'p.sqlite'), { readonly: true });
      try {
        return (file.prepare('SELECT count(*) AS n FROM call_ids').get() as { n: number }).n;
      } finally {
        file.close();
      }
    };
    try {
      const backlog = PRUNE_BATCH * 2 + 10;
      for (let i = 0; i < backlog; i++) ledger.take('p', `p.a.${i}`, a, 100_000, 100_000);
      expect(count()).toBe(backlog);
      // Each take past the retention deletes one batch and adds its own entry.
      expect(ledger.take('p', 'p.a.new0', a, 200_000, 200_000)).toBeUndefined();
      expect(count()).toBe(backlog - PRUNE_BATCH + 1);
      ledger.take('p', 'p.a.new1', a, 200_001, 200_001);
      ledger.take('p', 'p.a.new2', a, 200_002, 200_002);
      expect(count()).toBe(3);
      // Caught up: the next prune waits its minute again (new0–2 are past retention by then).
      ledger.take('p', 'p.a.new3', a, 250_000, 250_000);
      expect(count()).toBe(4);
    } finally {
      ledger.close();
    }
  });

  it('that cannot be opened lets the call go on, and says so', () => {
    fs.mkdirSync(path.join(dataDir, CALL_ID_LEDGER_DIR, 'bad.sqlite'), { recursive: true });
    const errors: string[] = [];
    const ledger = new CallIdLedger({ dataDir, retentionMs: 1000, onError: (workspace) => errors.push(workspace) });
    try {
      expect(ledger.take('bad', 'bad.a.1', a, 1, 1)).toBeUndefined();
      expect(errors).toEqual(['bad']);
    } finally {
      ledger.close();
    }
  });
});
