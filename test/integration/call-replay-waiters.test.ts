import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// The same call sent twice at once under one call id, by one client (a runtime retrying, a
// property test's interleavings): the replay answered where the call stood and then dropped every
// waiter of the call's key — the first call's too — so the first waited out its whole
// `timeoutMs` (30 s by default) before looking again. call-identity.test.ts's random
// interleavings timed out at 60 s in the full suite from this.

let sb: Sandbox;
let client: AgentDbClient;
let key: string;
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
// Longer than the test's own timeout: a waiter that only the fallback look would end fails.
const NEVER = 10 * 60_000;

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '2' });
  await sb.pool();
  client = sb.client();
  key = (await new MemberRegistry(redis, keysFor(sb.config.prefix)).add('rw', 'member', 'member')).key;
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

const gated = (agent: string, callId: string): CallInput => ({
  workspace: 'rw',
  agent,
  settings: { database: 'agent', approval: 'write' },
  callId,
  tool: 'DATA_WRITE_SQL',
  arguments: { sql: 'CREATE TABLE IF NOT EXISTS t (x)' },
});

describe('a replay under the same call id leaves the first call’s wait alone', () => {
  it('a waited call still hears its completion after the same call was sent again while it waited for a person', async () => {
    let parked!: (a: AwaitingAnswer) => void;
    const parkedNow = new Promise<AwaitingAnswer>((r) => (parked = r));
    const first = client.call(gated('a', 'w-1'), {
      timeoutMs: NEVER,
      onStatus: (s) => s.status === 'awaiting_approval' && parked(s as AwaitingAnswer),
    });
    const approval = await parkedNow;
    // The replay answers at once where the call stands…
    expect(await client.call(gated('a', 'w-1'), { wait: false, timeoutMs: NEVER })).toMatchObject({
      status: 'awaiting_approval',
      approval: { id: approval.approval.id },
    });
    // …and the first call still hears the decision's outcome.
    expect(await client.decide(approval.approval.id, { decision: 'approve', key })).toMatchObject({ ok: true });
    expect(await first).toMatchObject({ ok: true, callId: 'w-1' });
  });

  it('the same call sent again before it is parked waits for the parking, and the first call still hears it', async () => {
    let queued!: () => void;
    const queuedNow = new Promise<void>((r) => (queued = r));
    const seen: string[] = [];
    const first = client.call(gated('b', 'w-2'), {
      timeoutMs: NEVER,
      onStatus: (s) => {
        seen.push(s.status);
        if (s.status === 'queued') queued();
      },
    });
    await queuedNow;
    // Sent once the first is in the queue: its enqueue time differs, so it is the replay.
    const again = await client.call(gated('b', 'w-2'), { wait: false, timeoutMs: NEVER });
    expect(again).toMatchObject({ status: 'awaiting_approval' });
    await expect.poll(() => seen).toEqual(['queued', 'awaiting_approval']);
    await client.decide((again as AwaitingAnswer).approval.id, { decision: 'approve', key });
    expect(await first).toMatchObject({ ok: true, callId: 'w-2' });
  });

  it('two identical unwaited calls sent at once both answer once the call is parked', async () => {
    const [a, b] = await Promise.all([
      client.call(gated('c', 'w-3'), { wait: false, timeoutMs: NEVER }),
      client.call(gated('c', 'w-3'), { wait: false, timeoutMs: NEVER }),
    ]);
    expect(a).toMatchObject({ status: 'awaiting_approval' });
    expect(b).toMatchObject({ status: 'awaiting_approval' });
    expect((a as AwaitingAnswer).approval.id).toBe((b as AwaitingAnswer).approval.id);
  });
});
