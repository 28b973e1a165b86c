import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import { RESTORE_ONCE_BYTES, RestoreOnce } from '../../src/shards/restore-once.ts';
import { REDIS_URL, type Sandbox } from '../helpers/harness.ts';
import { withWebHistory } from '../helpers/web-history.ts';
import type { WebServer } from '../helpers/web-server.ts';

// A restore form's and an Idempotency-Key's records (src/shards/restore-once.ts) were kept an
// hour each in Redis, outside the workspace's Redis budget: a member sending restores under new
// tokens grew them without bound (session 32, T10's list; session 33, T11). They now count.

const held = async (budget: WorkspaceRedisBudget, workspace: string) => (await budget.note(workspace, [])).held;

describe('RestoreOnce against a Redis budget', () => {
  let redis: Redis;
  const keys = keysFor(`t-${randomUUID().slice(0, 12)}`);
  // The budget refuses once a workspace holds its cap: two submissions fill it.
  const cap = 2 * RESTORE_ONCE_BYTES;
  let budget: WorkspaceRedisBudget;
  let once: RestoreOnce;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    budget = new WorkspaceRedisBudget(redis, keys, cap);
    once = new RestoreOnce(redis, keys, { budget: { budget, planOf: async () => 'pro' } });
  });
  afterAll(async () => {
    const left = await redis.keys(`${keys.redisBudget('x').ledger.split(':')[0]}:*`);
    if (left.length) await redis.del(...left);
    redis.disconnect();
  });

  it('counts each new submission, not one sent again; a failed one lets go; past the budget QUOTA_EXCEEDED and nothing runs', async () => {
    let ran = 0;
    const act = async () => `/done/${++ran}`;
    const still = () => 'still';
    expect(await once.run('ws1', 'token-a', 'sub', act, still)).toBe('/done/1');
    expect(await held(budget, 'ws1')).toBe(RESTORE_ONCE_BYTES);
    // The same form again: its first outcome, counted once.
    expect(await once.run('ws1', 'token-a', 'sub', act, still)).toBe('/done/1');
    expect(await held(budget, 'ws1')).toBe(RESTORE_ONCE_BYTES);
    // A submission that fails is forgotten, and so is its count.
    await expect(once.run('ws1', 'token-b', 'sub', async () => Promise.reject(new Error('mistyped')), still)).rejects.toThrow('mistyped');
    expect(await held(budget, 'ws1')).toBe(RESTORE_ONCE_BYTES);
    // Without a token (only the request and the database's state tell): counted too.
    expect(await once.run('ws1', undefined, 'sub-plain', act, still, async () => 'state-1')).toBe('/done/2');
    expect(await held(budget, 'ws1')).toBe(2 * RESTORE_ONCE_BYTES);
    // Full: refused with when room comes back, nothing run, nothing kept under the token.
    const refused = await once.run('ws1', 'token-c', 'sub', act, still).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'QUOTA_EXCEEDED', retryAfter: expect.any(Number) });
    expect(ran).toBe(2);
    expect(await held(budget, 'ws1')).toBe(2 * RESTORE_ONCE_BYTES);
    // Another workspace notices nothing.
    expect(await once.run('ws2', 'token-c', 'sub', act, still)).toBe('/done/3');
  });

  it("keeps the database's state as its hash, whatever its length", async () => {
    const state = 'g'.repeat(200_000);
    expect(
      await once.run(
        'ws3',
        undefined,
        'long',
        async () => '/x',
        () => 'still',
        async () => state,
      ),
    ).toBe('/x');
    const [key] = await redis.keys(keys.restoreOnce('*'));
    expect(Number(await redis.memory('USAGE', key!))).toBeLessThan(RESTORE_ONCE_BYTES / 2);
    // And still answers the first outcome while the state stands.
    expect(
      await once.run(
        'ws3',
        undefined,
        'long',
        async () => '/y',
        () => 'still',
        async () => state,
      ),
    ).toBe('/x');
  });
});

describe("the web page's restore form", () => {
  const DB = 'acme/scout';
  let box: Sandbox;
  let web: WebServer;
  let redis: Redis;
  let history: HistoryClient;
  let cookie = '';

  withWebHistory((h) => ({ box, web, redis, history, cookie } = h));

  async function activityForm(): Promise<URLSearchParams> {
    const r = await fetch(`${web.url}/data/history?db=${encodeURIComponent(DB)}`, { headers: { cookie, accept: 'text/html' } });
    const page = await r.text();
    const [, body] = page.match(/<form method="post" action="\/data\/history\/activity-restore"[^>]*>([\s\S]*?)<\/form>/)!;
    const form = new URLSearchParams([...body!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map(([, n, v]) => [n!, v!]));
    form.set('confirm', DB);
    return form;
  }

  const post = (fields: URLSearchParams) =>
    fetch(`${web.url}/data/history/activity-restore`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: web.url, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: fields.toString(),
    });

  it("counts its records in the workspace's Redis budget, and is refused once the workspace holds it", { timeout: 60_000 }, async () => {
    const { ledger } = keysFor(box.config.prefix).redisBudget('acme');
    const a = await post(await activityForm());
    expect(a.status).toBe(303);
    const restoreEntries = async () => (await redis.zrange(ledger, 0, -1)).filter((m) => m.startsWith('restore-once:'));
    expect(await restoreEntries()).toHaveLength(1);
    expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(1);

    // The workspace at its budget (a call's worth of bytes kept for an hour past the plan's cap).
    const budget = new WorkspaceRedisBudget(redis, keysFor(box.config.prefix));
    await budget.note('acme', [{ callKey: 'filler', kind: 'done', bytes: budget.capOf('pro'), until: Date.now() + 3_600_000 }]);
    const b = await post(await activityForm());
    expect(b.status).toBe(429);
    expect(await b.text()).toMatch(/QUOTA_EXCEEDED|holds \d+ bytes in Redis/);
    expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(1);
    expect(await restoreEntries()).toHaveLength(1);
  });
});
