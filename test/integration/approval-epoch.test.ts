import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalIdFor } from '../../src/approvals/approval.ts';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { callKeyOf } from '../../src/contracts/call-identity.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Fault review 19, FT-2: after Redis came back empty, a call parked again got the id of the
// approval a person had already decided, so a retried decision or a stale inbox card approved
// what the call would do now. Approval ids carry an epoch Redis makes anew when it starts empty.
let sb: Sandbox;
let client: AgentDbClient;
let redis: Redis;
let store: ApprovalStore;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  redis = new Redis(REDIS_URL);
  store = new ApprovalStore(redis, keysFor(sb.config.prefix));
});

afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
});

describe('approval ids and the epoch of the Redis that holds them', () => {
  it('derives a parked call’s approval id from its key and this Redis’s epoch, the same from every connection', async () => {
    const answer = await client.call({ ...who, callId: 'ep1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE ep1 (x)' } }, { wait: false });
    expect(answer).toMatchObject({ status: 'awaiting_approval' });
    const epoch = await store.epoch();
    const other = new Redis(REDIS_URL);
    try {
      expect(await new ApprovalStore(other, keysFor(sb.config.prefix)).epoch()).toBe(epoch);
    } finally {
      other.disconnect();
    }
    const key = callKeyOf({ ...who, callId: 'ep1' });
    const id = (answer as unknown as { approval: { id: string } }).approval.id;
    expect(id).toBe(approvalIdFor(key, 1, epoch));
    expect(id).not.toBe(approvalIdFor(key));
    expect((await store.current(key))?.id).toBe(id);
  });

  it('gives the same call a new approval id once Redis has lost its epoch, so the old id decides nothing', async () => {
    const key = callKeyOf({ ...who, callId: 'ep2' });
    const parked = await client.call({ ...who, callId: 'ep2', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE ep2 (x)' } }, { wait: false });
    const before = (parked as unknown as { approval: { id: string } }).approval.id;
    expect(before).toBe(approvalIdFor(key, 1, await store.epoch()));
    // What an empty Redis forgets: the epoch, with every approval.
    const keys = keysFor(sb.config.prefix);
    await redis.del(keys.approvalEpoch, keys.approval(before));
    const after = approvalIdFor(key, 1, await store.epoch());
    expect(after).not.toBe(before);
    // A decision sent to the old id finds nothing to decide.
    expect(await store.get(before)).toBeUndefined();
    expect(await store.current(key)).toBeUndefined();
  });

  it('still finds a call parked before approval ids had an epoch', async () => {
    const key = callKeyOf({ ...who, callId: 'legacy' });
    const legacy = approvalIdFor(key);
    const { approval } = await store.create({
      id: legacy,
      callId: 'legacy',
      callKey: key,
      digest: 'd',
      workspace: 'acme',
      agent: 'scout',
      database: 'acme/scout',
      tool: 'DATA_WRITE_SQL',
      tier: 'write',
      sql: 'CREATE TABLE legacy (x)',
      shard: 0,
      shared: false,
      createdAt: Date.now(),
      expiresAt: Date.now() + 60_000,
    } as Parameters<ApprovalStore['create']>[0]);
    expect(approval.id).toBe(legacy);
    expect((await store.current(key))?.id).toBe(legacy);
  });
});
