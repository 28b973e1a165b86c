import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor, type Keys } from '../../src/redis/keys.ts';
import { pruneRedis } from '../../src/schedule/redis-maintenance.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { approvalRequest } from '../helpers/approval-request.ts';
import { countCommands } from '../helpers/redis-commands.ts';

// Hostile review H27-3: a workspace's inbox and Data page read only its own approvals' index, so
// another workspace's thousands of approvals cost them nothing.

const DAY_MS = 24 * 3600 * 1000;
const T0 = Date.now();

// Far off, so deciding never meets the expiry.
const request = (id: string, workspace: string, agent: string, createdAt: number, tool = 'DATA_WRITE_SQL') =>
  approvalRequest({ id, workspace, agent, createdAt, expiresAt: T0 + 30 * DAY_MS, tool });

/** A connection that counts the commands it sends (pipelined ones each), without MONITOR. */
function countingRedis(): { redis: Redis; sent: () => number } {
  const redis = new Redis(REDIS_URL);
  return { redis, sent: countCommands(redis) };
}

let sb: Sandbox;
let keys: Keys;
let redis: Redis;
let store: ApprovalStore;
const counting = countingRedis();

/** Makes `n` decided approvals of the workspace `evil`, the way parked calls make them. */
async function flood(from: number, n: number): Promise<void> {
  for (let i = from; i < from + n; i += 250) {
    const ids = Array.from({ length: Math.min(250, from + n - i) }, (_, k) => `ap_evil${i + k}`);
    await Promise.all(ids.map((id, k) => store.create(request(id, 'evil', 'spam', T0 - DAY_MS + i + k, 'DATA_DROP_TABLE'))));
    await Promise.all(ids.map((id) => store.transition(id, 'rejected', 'evil/admin')));
  }
}

/** Commands one store (made afresh, as each process's is) sends for the quiet workspace's pages. */
async function quietPagesCost(): Promise<{ commands: number; decided: string[]; pending: string[]; byDb: [string, number][] }> {
  const quietStore = new ApprovalStore(counting.redis, keys);
  const before = counting.sent();
  const decided = await quietStore.pages.page({ workspace: 'quiet', state: 'decided', offset: 0, limit: 25 });
  const pending = await quietStore.pages.page({ workspace: 'quiet', state: 'pending', offset: 0, limit: 25 });
  const byDb = await quietStore.pages.pendingByDatabase('quiet');
  return {
    commands: counting.sent() - before,
    decided: decided.approvals.map((a) => a.id),
    pending: pending.approvals.map((a) => a.id),
    byDb: [...byDb].sort(),
  };
}

beforeAll(async () => {
  sb = sandbox();
  keys = keysFor(sb.config.prefix);
  redis = new Redis(REDIS_URL);
  store = new ApprovalStore(redis, keys);
  // As on a service upgraded earlier: the one-time backfill (tested below) has run.
  await store.pages.pendingByDatabase('quiet');
  // Created in the opposite order to that in which they are decided below.
  await store.create(request('ap_qc', 'quiet', 'miner', T0 - 3000));
  await store.create(request('ap_qb', 'quiet', 'miner', T0 - 2000));
  await store.create(request('ap_qa', 'quiet', 'scout', T0 - 1000));
  for (const id of ['ap_qa', 'ap_qb', 'ap_qc']) expect(await store.transition(id, 'approved', 'quiet/ada')).toBe('OK');
  await store.create(request('ap_qp1', 'quiet', 'miner', T0 - 500));
  await store.create(request('ap_qp2', 'quiet', 'scout', T0 - 400, 'DATA_DROP_TABLE'));
  await store.create(request('ap_qp3', 'quiet', 'miner', T0 - 300));
  await flood(0, 3000);
}, 120_000);

afterAll(async () => {
  redis.disconnect();
  counting.redis.disconnect();
  await sb.cleanup();
});

describe('a workspace inbox beside another with thousands of approvals', () => {
  it('costs the same number of Redis commands whatever the other workspace holds', async () => {
    const at3000 = await quietPagesCost();
    await flood(3000, 1000);
    const at4000 = await quietPagesCost();
    expect(at4000.commands).toBe(at3000.commands);
    // Its own six approvals, not the other's thousands.
    expect(at3000.commands).toBeLessThan(40);
    expect(at4000.decided).toEqual(['ap_qc', 'ap_qb', 'ap_qa']);
    expect(at4000.pending).toEqual(['ap_qp3', 'ap_qp2', 'ap_qp1']);
    expect(at4000.byDb).toEqual([
      ['quiet/miner', 2],
      ['quiet/scout', 1],
    ]);
  }, 120_000);

  it('filters, counts, offers its own choices and pages', async () => {
    const filtered = await store.pages.page({ workspace: 'quiet', state: 'pending', offset: 0, limit: 25, filter: { agent: 'miner' } });
    expect(filtered.approvals.map((a) => a.id)).toEqual(['ap_qp3', 'ap_qp1']);
    expect(filtered.total).toBe(2);
    expect(filtered.choices).toEqual({ agent: ['miner', 'scout'], database: ['quiet/miner', 'quiet/scout'], tool: ['DATA_DROP_TABLE', 'DATA_WRITE_SQL'] });
    const second = await store.pages.page({ workspace: 'quiet', state: 'decided', offset: 1, limit: 1 });
    expect(second.approvals.map((a) => a.id)).toEqual(['ap_qb']);
    expect(second.total).toBe(3);
    const evil = await store.pages.page({ workspace: 'evil', state: 'decided', offset: 0, limit: 2 });
    expect(evil.total).toBe(4000);
    expect(evil.approvals.every((a) => a.workspace === 'evil' && a.state === 'rejected')).toBe(true);
  });

  it('moves an approval from the pending list to the decided one when it is decided', async () => {
    expect(await store.transition('ap_qp1', 'rejected', 'quiet/ada')).toBe('OK');
    expect((await store.pages.page({ workspace: 'quiet', state: 'pending', offset: 0, limit: 25 })).approvals.map((a) => a.id)).toEqual(['ap_qp3', 'ap_qp2']);
    expect((await store.pages.page({ workspace: 'quiet', state: 'decided', offset: 0, limit: 1 })).approvals.map((a) => a.id)).toEqual(['ap_qp1']);
    expect((await store.pages.pendingByDatabase('quiet')).get('quiet/miner')).toBe(1);
  });

  it('lets the retention prune take decided approvals out of their workspace index, keeping pending ones', async () => {
    await pruneRedis(redis, keys, { now: T0 + 2 * DAY_MS, usageDays: 400, approvalDays: 1 });
    expect(await redis.zcard(keys.approvalsDecidedOf('quiet'))).toBe(0);
    expect(await redis.zcard(keys.approvalsDecidedOf('evil'))).toBe(0);
    expect(await redis.zrange(keys.approvalsPendingOf('quiet'), 0, -1)).toEqual(['ap_qp2', 'ap_qp3']);
    expect((await store.pages.page({ workspace: 'quiet', state: 'pending', offset: 0, limit: 25 })).total).toBe(2);
  });
});

describe('approvals recorded before the per-workspace indexes', () => {
  let old: Sandbox;
  let oldKeys: Keys;
  beforeAll(() => {
    old = sandbox();
    oldKeys = keysFor(old.config.prefix);
  });
  afterAll(() => old.cleanup());

  /** Writes a record as approval-create.lua and approval-transition.lua did before this change. */
  async function recordTheOldWay(id: string, workspace: string, agent: string, createdAt: number, decidedAt?: number): Promise<void> {
    const req = request(id, workspace, agent, createdAt);
    await redis.hset(oldKeys.approval(id), {
      request: JSON.stringify(req),
      state: decidedAt ? 'approved' : 'pending',
      workspace,
      createdAt: String(createdAt),
      expiresAt: String(req.expiresAt),
      ...(decidedAt ? { decidedAt: String(decidedAt) } : {}),
    });
    if (!decidedAt) await redis.zadd(oldKeys.approvalsPending, req.expiresAt, id);
    await redis.zadd(oldKeys.approvalsAll, createdAt, id);
  }

  it('backfills them once, on the first page, from the service-wide indexes', async () => {
    await recordTheOldWay('ap_o1', 'quiet', 'miner', T0 - 900, T0 - 10);
    await recordTheOldWay('ap_o2', 'quiet', 'miner', T0 - 800, T0 - 20);
    await recordTheOldWay('ap_o3', 'quiet', 'scout', T0 - 700);
    await recordTheOldWay('ap_o4', 'other', 'scout', T0 - 600);
    // Pending and past retention: out of the all-time index, still in the pending one.
    await recordTheOldWay('ap_o5', 'quiet', 'miner', T0 - 40 * DAY_MS);
    await redis.zrem(oldKeys.approvalsAll, 'ap_o5');
    const oldStore = new ApprovalStore(redis, oldKeys);
    expect(await redis.exists(oldKeys.approvalsIndexed)).toBe(0);
    const decided = await oldStore.pages.page({ workspace: 'quiet', state: 'decided', offset: 0, limit: 25 });
    expect(decided.approvals.map((a) => a.id)).toEqual(['ap_o1', 'ap_o2']);
    expect(await redis.exists(oldKeys.approvalsIndexed)).toBe(1);
    const pending = await oldStore.pages.page({ workspace: 'quiet', state: 'pending', offset: 0, limit: 25 });
    expect(pending.approvals.map((a) => a.id)).toEqual(['ap_o3', 'ap_o5']);
    expect(pending.choices.tool).toEqual(['DATA_WRITE_SQL']);
    expect([...(await oldStore.pages.pendingByDatabase('other'))]).toEqual([['other/scout', 1]]);
    // Decided after the upgrade: it moves lists like any other.
    expect(await oldStore.transition('ap_o3', 'rejected', 'quiet/ada')).toBe('OK');
    expect((await oldStore.pages.page({ workspace: 'quiet', state: 'decided', offset: 0, limit: 1 })).approvals.map((a) => a.id)).toEqual(['ap_o3']);
  });

  it('drops an entry the backfill listed as pending while it was being decided', async () => {
    await redis.zadd(oldKeys.approvalsPendingOf('quiet'), T0 - 800, 'ap_o2');
    const page = await new ApprovalStore(redis, oldKeys).pages.page({ workspace: 'quiet', state: 'pending', offset: 0, limit: 25 });
    expect(page.approvals.map((a) => a.id)).toEqual(['ap_o5']);
    expect(await redis.zscore(oldKeys.approvalsPendingOf('quiet'), 'ap_o2')).toBeNull();
  });
});
