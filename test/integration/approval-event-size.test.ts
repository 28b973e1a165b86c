import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { INLINE_ENVELOPE_BYTES } from '../../src/redis/events.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// The events stream is the service's, bounded at ~320 MB by carrying no envelope past 16 KiB; an
// approval's events carried its whole effect (up to MAX_PARKED_CALL_BYTES, 64 KiB), twice per
// approval (requested, decided): 58 KB of JSON an event, 63 KB of the stream, in no workspace's
// budget (session 34, T12). A large effect now travels by reference, and a caller told its call
// is parked still reads the effect whole.
let sb: Sandbox;
let client: AgentDbClient;
let redis: Redis;
const cols = Array.from({ length: 20 }, (_, i) => `c${i}`);

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  redis = new Redis(REDIS_URL);
  const write = (sql: string) => client.call({ workspace: 'big', agent: 'a', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(await write(`CREATE TABLE t (${cols.map((c) => `${c} TEXT`).join(', ')})`)).toMatchObject({ ok: true });
  const values = cols.map(() => `printf('%.300c', 'x')`).join(', ');
  expect(await write(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) INSERT INTO t SELECT ${values} FROM n`)).toMatchObject({
    ok: true,
  });
}, 60_000);

afterAll(async () => {
  redis?.disconnect();
  await sb?.cleanup();
}, 60_000);

it('publishes an approval with a large effect by reference, and answers the parked call with the effect whole', async () => {
  const parked = await client.call(
    {
      workspace: 'big',
      agent: 'a',
      settings: { database: 'agent', approval: 'write' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: `UPDATE t SET ${cols.map((c) => `${c} = upper(${c})`).join(', ')}` },
    },
    { wait: false },
  );
  expect(parked).toMatchObject({ status: 'awaiting_approval' });
  const approval = (parked as unknown as { approval: { effect?: { rows?: unknown[] } } }).approval;
  expect(approval.effect?.rows?.length).toBeGreaterThan(0);
  const [[, fields]] = (await redis.xrevrange(keysFor(sb.config.prefix).events, '+', '-', 'COUNT', 1)) as [string, string[]][];
  expect(fields[1]).toBe('approval.requested');
  const event = JSON.parse(fields[3]!);
  expect(Buffer.byteLength(fields[3]!)).toBeLessThanOrEqual(INLINE_ENVELOPE_BYTES);
  expect(event.approval).toMatchObject({ effectByReference: true });
  expect(event.approval.effect).toBeUndefined();
}, 60_000);
