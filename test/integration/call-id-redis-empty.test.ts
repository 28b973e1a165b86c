import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallInput } from '../../src/contracts/call.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A call id after Redis came back empty (no AOF): the claim naming what the id was first used
// for is gone from Redis; the call-id ledger on disk and the database's exactly-once record still
// know. Another statement under the id is refused — and used to keep the id, so the first call's
// own re-send answered IDEMPOTENCY_CONFLICT "nothing ran" for a write that had committed (review
// of issue 25). Other databases and reads under the id: call-id-ledger.test.ts.

let own: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const insert = (callId: string, v: string): CallInput => ({
  ...who,
  callId,
  tool: 'DATA_WRITE_SQL',
  arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [v] },
});

async function rows(): Promise<unknown[][]> {
  const read = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t ORDER BY rowid' } });
  expect(read).toMatchObject({ ok: true });
  return (read as unknown as { result: { rows: unknown[][] } }).result.rows;
}

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ SHARD_COUNT: '2', REDIS_URL: own.url });
  await sb.pool();
  client = sb.client();
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })).toMatchObject({ ok: true });
});
afterAll(async () => {
  await sb.cleanup();
  await own.remove();
});

describe('a call id whose claim Redis lost', () => {
  it('answers the committed call again, refuses another statement without keeping the id, and runs nothing twice', async () => {
    const first = await client.call(insert('X', 'first'));
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });

    await own.kill();
    own.wipe();
    await own.start();

    // Another statement under X: the record in the database refuses it.
    const other = await client.call(insert('X', 'second'));
    expect(other).toMatchObject({ ok: false, callId: 'X', error: { code: 'IDEMPOTENCY_CONFLICT' } });

    // The first call sent again answers its recorded result: the write committed.
    expect(await client.call(insert('X', 'first'))).toEqual(first);
    expect(await client.result('X', who)).toEqual(first);

    // The id stays the first call's: another statement, another tool, the refused call again.
    expect(await client.call(insert('X', 'second'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await client.call(insert('X', 'third'))).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await client.call({ ...who, callId: 'X', tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } })).toMatchObject({
      ok: false,
      error: { code: 'IDEMPOTENCY_CONFLICT' },
    });
    // Another database (the workspace's shared one) under X, once the id is the first call's again.
    const shared: CallInput = { ...insert('X', 'first'), settings: { database: 'workspace', sharedData: true } };
    expect(await client.call({ ...shared, arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: ['first'], scope: 'workspace' } })).toMatchObject({
      ok: false,
      error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining('the database (acme/scout, now acme)') },
    });
    expect(await client.call(insert('X', 'first'))).toEqual(first);
    expect(await rows()).toEqual([['first']]);
  });

  it('answers the first call when the refused one is sent again before it', async () => {
    const wrote = await client.call(insert('Y', 'y'));
    expect(wrote).toMatchObject({ ok: true });

    await own.kill();
    own.wipe();
    await own.start();

    const refused = insert('Y', 'not y');
    expect(await client.call(refused)).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    // The refused call sent again keeps its own answer; it does not take the id back.
    expect(await client.call(refused)).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await client.call(insert('Y', 'y'))).toEqual(wrote);
    expect(await rows()).toEqual([['first'], ['y']]);
  });
});
