import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Approval, ApprovalState } from '../../src/approvals/approval.ts';
import type { ListCursor } from '../../src/approvals/approval-listing.ts';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor, type Keys } from '../../src/redis/keys.ts';
import { withScripts } from '../../src/redis/lua-scripts.ts';
import { pruneRedis } from '../../src/schedule/redis-maintenance.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { approvalRequest } from '../helpers/approval-request.ts';
import { countCommands } from '../helpers/redis-commands.ts';

// `GET /v1/approvals` (ApprovalPages.scan) reads only the workspace's own indexes: before, it
// walked the service-wide ones, 5,000 entries a page, so a workspace whose approvals sat behind
// another's thousands got short or empty pages (issue 27's hostile review).

const DAY_MS = 24 * 3600 * 1000;
const T0 = Date.now();

const request = (id: string, workspace: string, createdAt: number, expiresAt: number, agent = 'scout') =>
  approvalRequest({ id, workspace, agent, createdAt, expiresAt });

/** What workspace `b` holds, as the test made it: id, state, creation and expiry. */
interface Made {
  id: string;
  state: ApprovalState;
  createdAt: number;
  expiresAt: number;
}

/** The order a list gives: pending by expiry, the rest by creation, newest first, ties by descending id. */
function expected(made: Made[], state: ApprovalState | 'all'): string[] {
  const score = (m: Made) => (state === 'pending' ? m.expiresAt : m.createdAt);
  return made
    .filter((m) => state === 'all' || m.state === state)
    .sort((x, y) => score(y) - score(x) || (x.id < y.id ? 1 : -1))
    .map((m) => m.id);
}

/** Every page of a list, as a client follows `next`. */
async function pages(store: ApprovalStore, workspace: string, state: ApprovalState | 'all', limit: number): Promise<Approval[][]> {
  const out: Approval[][] = [];
  let cursor: ListCursor | undefined;
  do {
    const page = await store.pages.scan({ workspace, state, limit, ...(cursor ? { cursor } : {}) });
    out.push(page.approvals);
    cursor = page.next;
    expect(out.length, 'pages').toBeLessThan(50);
  } while (cursor);
  return out;
}

let sb: Sandbox;
let keys: Keys;
let redis: Redis;
let store: ApprovalStore;
const made: Made[] = [];

/** Makes one of `b`'s approvals in `state`. */
async function make(id: string, state: ApprovalState, createdAt: number, expiresAt: number): Promise<void> {
  await store.create(request(id, 'b', createdAt, expiresAt));
  if (state !== 'pending') expect(await store.transition(id, state, state === 'expired' ? '' : 'b/ada')).toBe('OK');
  made.push({ id, state, createdAt, expiresAt });
}

beforeAll(async () => {
  sb = sandbox();
  keys = keysFor(sb.config.prefix);
  redis = new Redis(REDIS_URL);
  store = new ApprovalStore(redis, keys);
  // As on a service upgraded earlier: the one-time backfill has run, so what follows is indexed
  // by approval-create.lua and approval-transition.lua alone.
  await store.pages.scan({ workspace: 'b', state: 'pending', limit: 1 });
  expect(await redis.exists(keys.approvalsIndexed)).toBe(1);
  // Workspace b: 13 pending, 9 approved, 6 rejected, 3 expired; some made in the same
  // millisecond and some pending ones expiring in the same one, so the id breaks ties.
  for (let k = 0; k < 13; k++) await make(`ap_bp${k}`, 'pending', T0 - 10_000 + 10 * Math.floor(k / 2), T0 + DAY_MS + 100 * Math.floor(k / 3));
  for (let k = 0; k < 9; k++) await make(`ap_ba${k}`, 'approved', T0 - 10_000 + 5 * k, T0 + DAY_MS);
  for (let k = 0; k < 6; k++) await make(`ap_br${k}`, 'rejected', T0 - 10_000 + 7 * Math.floor(k / 2), T0 + DAY_MS);
  // Expired: made with their expiry already past, so the transition to `expired` is due.
  for (let k = 0; k < 3; k++) await make(`ap_be${k}`, 'expired', T0 - 10_000 + 3 * k, T0 - 1000);
  // Workspace a parks 5,000 calls after all of b's, expiring after all of b's: every one of them
  // is ahead of b's in both service-wide indexes.
  for (let i = 0; i < 5000; i += 250) {
    await Promise.all(Array.from({ length: 250 }, (_, k) => store.create(request(`ap_a${i + k}`, 'a', T0 + i + k, T0 + 20 * DAY_MS + i + k, 'spam'))));
  }
}, 120_000);

afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
});

describe("a workspace's list beside another's 5,000 pending approvals", () => {
  it("answers b's first page full, pending and all", async () => {
    for (const state of ['pending', 'all'] as const) {
      const page = await store.pages.scan({ workspace: 'b', state, limit: 5 });
      expect(page.approvals.map((a) => a.id)).toEqual(expected(made, state).slice(0, 5));
      expect(page.next).toBeDefined();
    }
  });

  it('pages every approval of b exactly once, in order, in every state, each page full but the last', async () => {
    for (const state of ['pending', 'approved', 'rejected', 'expired', 'all'] as const) {
      const want = expected(made, state);
      const got = await pages(store, 'b', state, 4);
      expect(
        got.map((p) => p.length),
        state,
      ).toEqual(Array.from({ length: Math.ceil(want.length / 4) }, (_, i) => Math.min(4, want.length - 4 * i)));
      expect(
        got.flat().map((a) => a.id),
        state,
      ).toEqual(want);
      expect(got.flat().every((a) => a.workspace === 'b')).toBe(true);
    }
  });

  it("reads none of a's approvals for b's page, nor for the CLI's list of b's", async () => {
    const counting = new Redis(REDIS_URL);
    const sent = countCommands(counting);
    try {
      const fresh = new ApprovalStore(counting, keys);
      const page = await fresh.pages.scan({ workspace: 'b', state: 'all', limit: 200 });
      expect(page.approvals.map((a) => a.id)).toEqual(expected(made, 'all'));
      // The backfill marker, b's index, its entries' small fields (pipelined: one command each), its records.
      expect(sent()).toBeLessThan(3 * made.length + 10);
      const before = sent();
      const listed = await fresh.pages.list({ workspace: 'b', state: 'all' });
      expect(listed.map((a) => a.id)).toEqual(expected(made, 'all'));
      expect(sent() - before).toBeLessThan(made.length + 10);
      // Pending: in the order the CLI lists them, by creation.
      const pendingCreated = made
        .filter((m) => m.state === 'pending')
        .sort((x, y) => y.createdAt - x.createdAt)
        .map((m) => m.createdAt);
      expect((await fresh.pages.list({ workspace: 'b' })).map((a) => a.createdAt)).toEqual(pendingCreated);
    } finally {
      counting.disconnect();
    }
  });

  it("keeps a's own list whole", async () => {
    const first = await store.pages.scan({ workspace: 'a', state: 'pending', limit: 200 });
    expect(first.approvals.map((a) => a.id)).toEqual(Array.from({ length: 200 }, (_, k) => `ap_a${4999 - k}`));
  });

  it('takes an approval out of the pending list when it is decided or expires, and lists it under its state', async () => {
    expect(await redis.zrange(keys.approvalsExpiringOf('b'), 0, -1)).toEqual(expect.arrayContaining(expected(made, 'pending')));
    expect(await redis.zcard(keys.approvalsExpiringOf('b'))).toBe(13);
    expect(await redis.zcard(keys.approvalsAllOf('b'))).toBe(made.length);
    expect(await store.transition('ap_bp12', 'rejected', 'b/ada')).toBe('OK');
    made.find((m) => m.id === 'ap_bp12')!.state = 'rejected';
    expect(await redis.zscore(keys.approvalsExpiringOf('b'), 'ap_bp12')).toBeNull();
    expect((await pages(store, 'b', 'pending', 200)).flat().map((a) => a.id)).toEqual(expected(made, 'pending'));
    expect((await pages(store, 'b', 'rejected', 200)).flat().map((a) => a.id)).toEqual(expected(made, 'rejected'));
    // An approval made expiring past its deadline leaves it when the worker expires it.
    await make('ap_bx', 'pending', T0 - 5000, T0 - 1);
    expect(await redis.zscore(keys.approvalsExpiringOf('b'), 'ap_bx')).not.toBeNull();
    expect(await store.transition('ap_bx', 'expired')).toBe('OK');
    made.find((m) => m.id === 'ap_bx')!.state = 'expired';
    expect(await redis.zscore(keys.approvalsExpiringOf('b'), 'ap_bx')).toBeNull();
    expect((await pages(store, 'b', 'expired', 2)).flat().map((a) => a.id)).toEqual(expected(made, 'expired'));
  });

  it('drops an entry listed as pending by a decision that did not know the index (an older process)', async () => {
    await redis.zadd(keys.approvalsExpiringOf('b'), T0 + 30 * DAY_MS, 'ap_ba0');
    expect((await store.pages.scan({ workspace: 'b', state: 'pending', limit: 200 })).approvals.map((a) => a.id)).toEqual(expected(made, 'pending'));
    expect(await redis.zscore(keys.approvalsExpiringOf('b'), 'ap_ba0')).toBeNull();
  });

  it('lets the retention prune take every record it deletes out of the workspace indexes, keeping pending ones listed by expiry', async () => {
    await pruneRedis(redis, keys, { now: T0 + 2 * DAY_MS, usageDays: 400, approvalDays: 1 });
    // As from the service-wide index of all: pending ones leave it too, past retention.
    expect(await redis.zcard(keys.approvalsAll)).toBe(0);
    expect(await redis.zcard(keys.approvalsAllOf('b'))).toBe(0);
    expect(await redis.zcard(keys.approvalsAllOf('a'))).toBe(0);
    expect((await redis.zrange(keys.approvalsExpiringOf('b'), 0, -1)).sort()).toEqual(expected(made, 'pending').sort());
    expect(await redis.zcard(keys.approvalsExpiringOf('a'))).toBe(5000);
    expect((await pages(store, 'b', 'pending', 5)).flat().map((a) => a.id)).toEqual(expected(made, 'pending'));
    expect(await store.pages.scan({ workspace: 'b', state: 'approved', limit: 5 })).toEqual({ approvals: [] });
  });
});

describe('approvals recorded before the per-workspace list indexes', () => {
  let old: Sandbox;
  let oldKeys: Keys;
  beforeAll(() => {
    old = sandbox();
    oldKeys = keysFor(old.config.prefix);
  });
  afterAll(() => old.cleanup());

  /** Writes a record as the previous release did: service-wide indexes and the inbox's own two. */
  async function recordTheOldWay(id: string, workspace: string, createdAt: number, expiresAt: number, decidedAt?: number): Promise<void> {
    await redis.hset(oldKeys.approval(id), {
      request: JSON.stringify(request(id, workspace, createdAt, expiresAt)),
      state: decidedAt ? 'approved' : 'pending',
      workspace,
      createdAt: String(createdAt),
      expiresAt: String(expiresAt),
      agent: 'scout',
      tool: 'DATA_WRITE_SQL',
      database: `${workspace}/scout`,
      ...(decidedAt ? { decidedAt: String(decidedAt) } : {}),
    });
    if (decidedAt) await redis.zadd(oldKeys.approvalsDecidedOf(workspace), decidedAt, id);
    else {
      await redis.zadd(oldKeys.approvalsPending, expiresAt, id);
      await redis.zadd(oldKeys.approvalsPendingOf(workspace), createdAt, id);
    }
    await redis.zadd(oldKeys.approvalsAll, createdAt, id);
  }

  it('backfills them once, on the first list, though the earlier backfill had marked the service done', async () => {
    await recordTheOldWay('ap_o1', 'b', T0 - 900, T0 + DAY_MS, T0 - 10);
    await recordTheOldWay('ap_o2', 'b', T0 - 800, T0 + DAY_MS + 5);
    await recordTheOldWay('ap_o3', 'b', T0 - 700, T0 + DAY_MS - 5);
    await recordTheOldWay('ap_o4', 'c', T0 - 600, T0 + DAY_MS);
    // Pending and past retention: out of the all-time index, still in the pending one.
    await recordTheOldWay('ap_o5', 'b', T0 - 40 * DAY_MS, T0 + DAY_MS + 1);
    await redis.zrem(oldKeys.approvalsAll, 'ap_o5');
    // The previous release's marker of its own backfill.
    await redis.set(`${old.config.prefix}:{approvals}:ws-indexed`, '1');
    expect(await redis.exists(oldKeys.approvalsIndexed)).toBe(0);
    const oldStore = new ApprovalStore(redis, oldKeys);
    expect((await oldStore.pages.scan({ workspace: 'b', state: 'pending', limit: 10 })).approvals.map((a) => a.id)).toEqual(['ap_o2', 'ap_o5', 'ap_o3']);
    expect(await redis.exists(oldKeys.approvalsIndexed)).toBe(1);
    expect((await oldStore.pages.scan({ workspace: 'b', state: 'all', limit: 10 })).approvals.map((a) => a.id)).toEqual(['ap_o3', 'ap_o2', 'ap_o1']);
    expect((await oldStore.pages.scan({ workspace: 'c', state: 'all', limit: 10 })).approvals.map((a) => a.id)).toEqual(['ap_o4']);
    // The inbox's indexes as they were, not doubled.
    expect(await redis.zrange(oldKeys.approvalsPendingOf('b'), 0, -1)).toEqual(['ap_o5', 'ap_o2', 'ap_o3']);
    expect(await redis.zrange(oldKeys.approvalsDecidedOf('b'), 0, -1)).toEqual(['ap_o1']);
    // Decided after the upgrade: it leaves the pending list like any other.
    expect(await oldStore.transition('ap_o2', 'rejected', 'b/ada')).toBe('OK');
    expect((await oldStore.pages.scan({ workspace: 'b', state: 'pending', limit: 10 })).approvals.map((a) => a.id)).toEqual(['ap_o5', 'ap_o3']);
    expect((await oldStore.pages.scan({ workspace: 'b', state: 'rejected', limit: 10 })).approvals.map((a) => a.id)).toEqual(['ap_o2']);
  });

  it('indexes a record as it stands when the script runs: a decided one as decided, a gone one nowhere', async () => {
    const scripted = withScripts(redis);
    const backfill = (id: string) =>
      scripted.agentdbApprovalIndexBackfill(
        oldKeys.approval(id),
        oldKeys.approvalsAll,
        oldKeys.approvalsPendingOf('b'),
        oldKeys.approvalsDecidedOf('b'),
        oldKeys.approvalsAllOf('b'),
        oldKeys.approvalsExpiringOf('b'),
        id,
      );
    const lists = [oldKeys.approvalsPendingOf('b'), oldKeys.approvalsDecidedOf('b'), oldKeys.approvalsAllOf('b'), oldKeys.approvalsExpiringOf('b')];
    // Pruned after the backfill read its workspace.
    expect(await backfill('ap_gone')).toBe(0);
    for (const list of lists) expect(await redis.zscore(list, 'ap_gone'), list).toBeNull();
    // Decided (above) after the backfill read it as pending.
    expect(await backfill('ap_o2')).toBe(1);
    expect(await redis.zscore(oldKeys.approvalsPendingOf('b'), 'ap_o2')).toBeNull();
    expect(await redis.zscore(oldKeys.approvalsExpiringOf('b'), 'ap_o2')).toBeNull();
    expect(Number(await redis.zscore(oldKeys.approvalsDecidedOf('b'), 'ap_o2'))).toBe(Number(await redis.hget(oldKeys.approval('ap_o2'), 'decidedAt')));
    expect(Number(await redis.zscore(oldKeys.approvalsAllOf('b'), 'ap_o2'))).toBe(T0 - 800);
  });
});
