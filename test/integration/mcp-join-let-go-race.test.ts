import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PendingCallJoins } from '../../src/calls/pending-call-joins.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { KeyAuthenticator, type KeyedCall, type Principal } from '../../src/registry/principal.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T2 (session 26): an MCP write refused RATE_LIMITED lets go of the join id it
// claimed (T1). Two identical sends at once: the first claims the id and is refused, the second
// joins the id and is admitted, then notes the id again (PendingCallJoins.remember). The first's
// delete, landing after that note, deleted the waiting call's entry (it names the same id), and
// the next resend became a second call with a second approval. The steps of tools/call are
// played here in that order, each awaited, with the real client and Redis.

let sb: Sandbox;
let k: KeyedApp;
let redis: Redis;
let joins: PendingCallJoins;
let agent: Principal;
const write: KeyedCall = { tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } };

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  redis = new Redis(REDIS_URL);
  const keys = keysFor(sb.config.prefix);
  joins = new PendingCallJoins(redis, keys, 3600);
  const bearer = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  agent = (await new KeyAuthenticator(redis, keys).authenticate(bearer))!;
});
afterAll(async () => {
  redis.disconnect();
  await k.close();
  await sb.cleanup();
});

it('a refused send does not let go of the id a joining send was taken under', async () => {
  const key = joins.keyFor(agent, write)!;
  const first = await joins.claim(key);
  const second = await joins.claim(key);
  expect(second).toEqual({ callId: first.callId, joined: true });
  // The first was refused RATE_LIMITED (not sent); the second is taken under the id, and notes it.
  const taken = await k.calls.call(agent, { ...write, callId: second.callId }, { wait: false, maxWaitMs: 10_000 });
  expect(taken).toMatchObject({ ok: false, status: 'awaiting_approval' });
  await joins.remember(key, second.callId);
  // Now the first lets go of the id it claimed.
  await joins.letGoUnsent(agent, key, first.callId);
  // A resend still joins the waiting call: no second call, no second approval.
  expect(await joins.claim(key)).toEqual({ callId: first.callId, joined: true });
});

it('a refused send no one joined lets go of its id', async () => {
  const other: KeyedCall = { ...write, arguments: { sql: 'INSERT INTO t VALUES (2)' } };
  const key = joins.keyFor(agent, other)!;
  const first = await joins.claim(key);
  await joins.letGoUnsent(agent, key, first.callId);
  expect(await redis.exists(key)).toBe(0);
});

// Session 27 (G1, 1): the refused send let go of the id while the joining send was still on its
// way; a third identical send landing in between claimed a new id, and the joiner and the third
// each made a call, two approvals for one write. The let-go now waits for the last send under
// the id that was not taken.
it('a third identical send between a refused send’s let-go and the joiner’s admission joins the same call', async () => {
  const other: KeyedCall = { ...write, arguments: { sql: 'INSERT INTO t VALUES (3)' } };
  const key = joins.keyFor(agent, other)!;
  const first = await joins.claim(key);
  const second = await joins.claim(key);
  // The first was refused RATE_LIMITED and lets go, the second not yet taken.
  await joins.letGoUnsent(agent, key, first.callId);
  const third = await joins.claim(key);
  expect(third).toEqual({ callId: first.callId, joined: true });
  const taken = await k.calls.call(agent, { ...other, callId: second.callId }, { wait: false, maxWaitMs: 10_000 });
  await joins.remember(key, second.callId);
  const again = await k.calls.call(agent, { ...other, callId: third.callId }, { wait: false, maxWaitMs: 10_000 });
  expect(taken).toMatchObject({ ok: false, status: 'awaiting_approval' });
  expect(again).toMatchObject({ ok: false, status: 'awaiting_approval', callId: taken.callId });
  expect((again as { approval: { id: string } }).approval.id).toBe((taken as { approval: { id: string } }).approval.id);
});

it('sends under one id all refused: the last to let go leaves nothing behind', async () => {
  const other: KeyedCall = { ...write, arguments: { sql: 'INSERT INTO t VALUES (4)' } };
  const key = joins.keyFor(agent, other)!;
  const first = await joins.claim(key);
  const second = await joins.claim(key);
  await joins.letGoUnsent(agent, key, first.callId);
  expect(await redis.get(key)).toBe(first.callId);
  await joins.letGoUnsent(agent, key, second.callId);
  expect(await redis.exists(key, keysFor(sb.config.prefix).mcpPendingSends(key))).toBe(0);
});
