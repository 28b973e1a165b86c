import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADD_KEYS, jobAdd } from '../../src/calls/admitted-add.ts';
import { ADMITTED_ADDS_LUA } from '../../src/calls/admitted-add-batch.ts';
import { callJobOptions } from '../../src/calls/call-resend.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import type { CallJobData } from '../../src/contracts/call.ts';
import { callKeyOf } from '../../src/contracts/call-identity.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Issue 31: the calls a caller enqueues in one turn are admitted and added by one script, each
// with its own verdict. A Redis of the test's own: its command counts are this test's alone.
let own: OwnRedis;
let admin: ReturnType<typeof connectRedis>;
let sb: Sandbox;
beforeAll(async () => {
  own = await OwnRedis.start();
  admin = connectRedis(own.url);
  sb = sandbox({ REDIS_URL: own.url });
});
afterAll(async () => {
  await sb.cleanup();
  admin.disconnect();
  await own.remove();
});

const keys = () => keysFor(sb.config.prefix);
const queueOf = (workspace: string) =>
  new Queue(keys().queueName(shardOf(databaseId(workspace, 'scout'), sb.config.shardCount)), { connection: admin, prefix: keys().bullPrefix });
/**
 * Scripts Redis ran since its counts were reset: by their SHA, or by their text the first time
 * (ioredis sends the text after Redis answered NOSCRIPT, which fails the EVALSHA uncounted).
 */
const scripts = async () => {
  const stats = await admin.info('commandstats');
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return calls('evalsha') + calls('eval');
};

describe("a turn's admitted adds", () => {
  it('go in one script, each call with its own verdict', async () => {
    const client = sb.client({ rateLimits: { windowS: 600, workspaceCalls: 4 } });
    const input = (i: number) => ({
      workspace: 'turn',
      agent: 'scout',
      settings: { database: 'agent' as const },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: `SELECT ${i}` },
    });
    // Warmed up (the plan, the shard count, the queue, the event reader), and the first of 4.
    // No worker runs: a queued call answers where it stands once its short wait is up.
    expect(await client.call(input(0), { wait: false, timeoutMs: 50 })).toMatchObject({ status: 'queued' });
    await admin.config('RESETSTAT');

    const answers = await Promise.all([
      ...[1, 2, 3, 4, 5, 6].map((i) => client.call(input(i), { wait: false, timeoutMs: 50 })),
      client.call({ ...input(7), arguments: { sql: 42 } }, { wait: false, timeoutMs: 50 }),
    ]);
    // In order of arrival: 3 more within the rate, 3 refused by it, and the bad one without Redis.
    expect(answers.slice(0, 3).map((a) => ('status' in a ? a.status : a))).toEqual(['queued', 'queued', 'queued']);
    for (const a of answers.slice(3, 6)) expect(a).toMatchObject({ ok: false, error: { code: 'RATE_LIMITED' } });
    expect(answers[6]).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
    // One script for the six admissions, then each queued call's look at its job's state
    // (BullMQ's getState, a script) once its wait was up. One script per call: 6 + 3.
    expect(await scripts()).toBe(1 + 3);

    const queue = queueOf('turn');
    for (const [i, a] of answers.entries()) {
      const job = await queue.getJob(callKeyOf({ workspace: 'turn', agent: 'scout', callId: a.callId }));
      expect(job !== undefined, `call ${i + 1}`).toBe(i < 3);
    }
    expect(await queue.getWaitingCount()).toBe(4);
    expect(client.waitCounts()).toEqual({ calls: 0, waits: 0, looks: 0 });
    await queue.close();
  });

  it('fails one call whose part of the script fails, and none of the others', async () => {
    const queue = queueOf('part');
    await queue.waitUntilReady();
    const budget = new WorkspaceRedisBudget(admin, keys(), 1024 * 1024);
    const data = (callId: string): CallJobData => ({
      callId,
      workspace: 'part',
      agent: 'scout',
      settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
      plan: 'pro',
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT 1' },
      enqueuedAt: Date.now(),
    });
    const admit = (callId: string, broken = false) => {
      const d = data(callId);
      const key = callKeyOf(d);
      const add = jobAdd(queue, 'call', d, callJobOptions(key, 3600));
      // BullMQ's packed arguments, unreadable: its script fails on them, after the admission.
      if (broken) add.args[0] = 'not msgpack';
      return budget.admitCall('part', 'pro', [{ callKey: key, kind: 'call', bytes: 100, until: Date.now() + 60_000 }], [], Date.now(), add);
    };
    await admin.config('RESETSTAT');
    const settled = await Promise.allSettled([admit('a'), admit('b', true), admit('c')]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(settled[0]).toMatchObject({ value: undefined });
    expect(await scripts()).toBe(1);
    const jobs = await Promise.all(['a', 'b', 'c'].map((id) => queue.getJob(callKeyOf(data(id)))));
    expect(jobs.map((j) => j !== undefined)).toEqual([true, false, true]);
    await queue.close();
  });

  it('sends each set of keys once: the calls of one workspace on one shard share theirs', async () => {
    const conn = connectRedis(own.url);
    try {
      // The script as the batch defines it, its keys counted as they are sent.
      conn.defineCommand('agentdbAdmittedAdds', { lua: ADMITTED_ADDS_LUA() });
      const scripted = conn as typeof conn & { agentdbAdmittedAdds(numKeys: number, ...rest: (string | Buffer)[]): Promise<unknown> };
      const run = scripted.agentdbAdmittedAdds.bind(conn);
      const sent: number[] = [];
      scripted.agentdbAdmittedAdds = (numKeys, ...rest) => (sent.push(numKeys), run(numKeys, ...rest));
      const budget = new WorkspaceRedisBudget(conn, keys(), 1024 * 1024);
      const queues = new Map<string, Queue>();
      const admit = async (workspace: string, callId: string) => {
        let queue = queues.get(workspace);
        if (!queue) queues.set(workspace, (queue = queueOf(workspace)));
        await queue.waitUntilReady();
        const d: CallJobData = {
          callId,
          workspace,
          agent: 'scout',
          settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
          plan: 'pro',
          tool: 'DATA_QUERY_SQL',
          arguments: { sql: 'SELECT 1' },
          enqueuedAt: Date.now(),
        };
        const add = jobAdd(queue, 'call', d, callJobOptions(callKeyOf(d), 3600));
        return { workspace, key: callKeyOf(d), add };
      };
      const calls = await Promise.all([...['k1', 'k2', 'k3', 'k4', 'k5'].map((id) => admit('sets', id)), admit('sets-other', 'o1')]);
      const verdicts = await Promise.all(
        calls.map(({ workspace, key, add }) =>
          budget.admitCall(workspace, 'pro', [{ callKey: key, kind: 'call', bytes: 100, until: Date.now() + 60_000 }], [], Date.now(), add),
        ),
      );
      expect(verdicts).toEqual(calls.map(() => undefined));
      // One script, two sets of BullMQ's keys and the budget's two: each call's 11 were sent again.
      expect(sent).toEqual([2 * (ADD_KEYS + 2)]);
      for (const { workspace, key } of calls) expect(await queues.get(workspace)!.getJob(key), key).toBeDefined();
      expect(await conn.get(keys().redisBudget('sets').held)).toBe('500');
      for (const queue of queues.values()) await queue.close();
    } finally {
      conn.disconnect();
    }
  });

  // The batch's budget note sums what it can per workspace: what it counts must stay what one
  // call's script at a time counts, call by call, and what a later sweep takes back.
  describe('budget note', () => {
    const BYTES = 300;
    const calls = [
      ['a', 'a1'],
      ['b', 'b1'],
      ['a', 'a2'],
      ['a', 'a3'],
      ['a', 'a4'],
      ['b', 'b2'],
      ['a', 'a5'],
      ['a', 'a6'],
    ] as const;
    /**
     * Admits `calls` into workspaces `<run>-a` and `<run>-b` (cap 1000 bytes, `a` 5 calls a
     * window): in one turn, one at a time, or one at a time by the budget note alone (`note`: no
     * job added; budget-note.lua's text for a batch of one).
     */
    const run = async (name: string, how: 'together' | 'alone' | 'note', now: number) => {
      const queue = queueOf(`${name}-a`);
      await queue.waitUntilReady();
      const budget = new WorkspaceRedisBudget(admin, keys(), 1000);
      const until = now + 60_000;
      // One entry of `a` gone by `now`: the batch's sweep takes it back.
      await budget.note(`${name}-a`, [{ callKey: 'old', kind: 'call', bytes: 700, until: now - 10 }], now - 20);
      const admit = ([ws, id]: readonly [string, string], i: number) => {
        const workspace = `${name}-${ws}`;
        const d: CallJobData = {
          callId: id,
          workspace,
          agent: 'scout',
          settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
          plan: 'pro',
          tool: 'DATA_QUERY_SQL',
          arguments: { sql: 'SELECT 1' },
          enqueuedAt: now,
        };
        const key = callKeyOf(d);
        const counters = ws === 'a' ? [{ of: 'workspace' as const, key: `${sb.config.prefix}:rate:${workspace}`, points: 1, limit: 5, windowS: 600 }] : [];
        // `b`'s second call a millisecond later: its workspace swept again.
        const at = ws === 'b' && i > 1 ? now + 1 : now;
        return budget.admitCall(
          workspace,
          'pro',
          [{ callKey: id, kind: 'call', bytes: BYTES, until: until + i }],
          counters,
          at,
          how === 'note' ? undefined : jobAdd(queue, 'call', d, callJobOptions(key, 3600)),
        );
      };
      await admin.config('RESETSTAT');
      let verdicts: Awaited<ReturnType<typeof admit>>[] = [];
      if (how === 'together') verdicts = await Promise.all(calls.map(admit));
      else for (const [i, c] of calls.entries()) verdicts.push(await admit(c, i));
      const stats = await admin.info('commandstats');
      const count = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
      const ledger = async (ws: string) => {
        const { ledger, held } = keys().redisBudget(`${name}-${ws}`);
        return {
          entries: await admin.zrange(ledger, 0, -1, 'WITHSCORES'),
          held: await admin.get(held),
          expires: [await admin.pexpiretime(ledger), await admin.pexpiretime(held)],
        };
      };
      const state = {
        verdicts: verdicts.map((v) =>
          v === undefined
            ? 'admitted'
            : 'rate' in v
              ? `rate ${v.rate.key.split(':').pop()?.replace(`${name}-`, '')}`
              : v.over.replace(`${name}-`, '').replace(/room .*$/, ''),
        ),
        a: await ledger('a'),
        b: await ledger('b'),
        rate: await admin.get(`${sb.config.prefix}:rate:${name}-a`),
      };
      await queue.close();
      return { state, budget, now, count };
    };

    it('counts a batch as one call at a time does, with its sum and expiry written once a workspace', async () => {
      const now = Date.now();
      const note = await run('note', 'note', now);
      const alone = await run('alone', 'alone', now);
      const batch = await run('batch', 'together', now);
      expect(alone.state).toEqual(note.state);
      expect(batch.state).toEqual(alone.state);
      // a1..a4 and b1, b2 in, a5 over the budget (the old entry swept first), a6 over the rate.
      expect(batch.state.verdicts.filter((v) => v === 'admitted')).toHaveLength(6);
      expect(batch.state.verdicts[7]).toBe('rate a');
      expect(batch.state.a.held).toBe(String(4 * BYTES));
      expect(batch.state.b.held).toBe(String(2 * BYTES));
      // Once a call at a time, per call: two PEXPIREAT and an INCRBY for the sum (and one for
      // the rate) each; the batch's: once per workspace (and counter), a sweep per moment.
      for (const one of [note, alone])
        expect({ pexpireat: one.count('pexpireat'), zrangebyscore: one.count('zrangebyscore') }).toEqual({ pexpireat: 12, zrangebyscore: 7 });
      expect({ pexpireat: batch.count('pexpireat'), zrangebyscore: batch.count('zrangebyscore'), incrby: batch.count('incrby') }).toEqual({
        pexpireat: 4,
        zrangebyscore: 3,
        incrby: 4,
      });
      // All of it comes back once the calls' entries have gone.
      const later = batch.now + 120_000;
      for (const ws of ['batch-a', 'batch-b']) {
        expect(await batch.budget.note(ws, [], later)).toEqual({ held: 0 });
        expect(await admin.exists(keys().redisBudget(ws).ledger, keys().redisBudget(ws).held)).toBe(0);
      }
    });

    it("fails a workspace whose sum INCRBY would refuse before its calls' adds, and no other workspace's", async () => {
      const queue = queueOf('sum-bad');
      await queue.waitUntilReady();
      const budget = new WorkspaceRedisBudget(admin, keys(), 1024 * 1024);
      await admin.set(keys().redisBudget('sum-bad').held, '1.5');
      const admit = (workspace: string, callId: string) => {
        const d: CallJobData = {
          callId,
          workspace,
          agent: 'scout',
          settings: { database: 'agent', approval: 'never', sandbox: false, sharedData: false },
          plan: 'pro',
          tool: 'DATA_QUERY_SQL',
          arguments: { sql: 'SELECT 1' },
          enqueuedAt: Date.now(),
        };
        const add = jobAdd(queue, 'call', d, callJobOptions(callKeyOf(d), 3600));
        return budget.admitCall(workspace, 'pro', [{ callKey: callId, kind: 'call', bytes: 100, until: Date.now() + 60_000 }], [], Date.now(), add);
      };
      const settled = await Promise.allSettled([admit('sum-bad', 'x1'), admit('sum-good', 'y1'), admit('sum-bad', 'x2')]);
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'fulfilled', 'rejected']);
      const ids = [callKeyOf({ workspace: 'sum-bad', agent: 'scout', callId: 'x1' }), callKeyOf({ workspace: 'sum-good', agent: 'scout', callId: 'y1' })];
      expect((await Promise.all(ids.map((id) => queue.getJob(id)))).map((j) => j !== undefined)).toEqual([false, true]);
      expect(await admin.get(keys().redisBudget('sum-good').held)).toBe('100');
      await queue.close();
    });
  });
});
