import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentDbClient, type CallAnswer } from '../../src/calls/client.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Review R2: a Redis stopped with SIGSTOP keeps its connections open and answers nothing, so the
// outage watch (a connection that drops) never hears of it, and ioredis has no command timeout.
// A call waiting when Redis stopped, and one made while it was stopped, both with timeoutMs 5 s,
// were still unanswered 20 s later. No worker runs here: the waiting call stays queued, so its
// wait reaches its timeoutMs and looks at its job.

let own: OwnRedis;
let client: AgentDbClient;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const write = (callId: string): CallInput => ({ ...who, callId, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });

beforeAll(async () => {
  own = await OwnRedis.start();
  client = new AgentDbClient({ redisUrl: own.url, prefix: 'redis-stopped', shardCount: 2 });
});
afterAll(async () => {
  own.signal('SIGCONT');
  await client.close();
  await own.remove();
});

describe('a Redis that answers nothing (SIGSTOP)', () => {
  it('answers a call waiting when it stopped, and one made while it is stopped, UNAVAILABLE (may still run)', { timeout: 60_000 }, async () => {
    let waiting!: Promise<CallAnswer>;
    await new Promise<void>((queued) => {
      waiting = client.call(write('before'), { timeoutMs: 5000, onStatus: (s) => s.status === 'queued' && queued() });
    });
    own.signal('SIGSTOP');
    try {
      const during = client.call(write('during'), { timeoutMs: 5000 });
      const [before, made] = await Promise.all([waiting, during]);
      expect(before).toMatchObject({ ok: false, callId: 'before', error: { code: 'UNAVAILABLE' }, mayStillRun: true });
      expect(made).toMatchObject({ ok: false, callId: 'during', error: { code: 'UNAVAILABLE' }, mayStillRun: true });
      // Answered without Redis: the answered waits are gone, not left for Redis to wake.
      expect(client.waitCounts()).toEqual({ calls: 0, waits: 0, looks: 0 });
    } finally {
      own.signal('SIGCONT');
    }
    // Once it answers again, so does the same client.
    expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, { wait: false, timeoutMs: 50 })).toMatchObject({
      status: 'queued',
    });
    // The work of the call made while it was stopped went on once it woke (its commands answered
    // before this last call's): it set its waits then, after its answer, and must not keep them.
    expect(client.waitCounts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  });

  it('answers a result asked for, and a decision made, while it is stopped UNAVAILABLE', { timeout: 60_000 }, async () => {
    // Connected first: a Redis that is stopped before the client ever heard it answers as one that is down.
    expect(await client.call(write('looked'), { wait: false, timeoutMs: 50 })).toMatchObject({ status: 'queued' });
    // What waits now stays, no more: the result's wait set while Redis answers nothing goes with its answer.
    const before = client.waitCounts();
    own.signal('SIGSTOP');
    try {
      const [looked, waited, decided] = await Promise.all([
        client.result('looked', { ...who }),
        client.result('looked', { ...who, wait: true, timeoutMs: 5000 }),
        client.decide('ap_stopped', { decision: 'approve', by: 'ops', operator: true }),
      ]);
      expect(looked).toMatchObject({ ok: false, callId: 'looked', error: { code: 'UNAVAILABLE' }, mayStillRun: true });
      expect(waited).toMatchObject({ ok: false, callId: 'looked', error: { code: 'UNAVAILABLE' }, mayStillRun: true });
      expect(decided).toMatchObject({ ok: false, code: 'UNAVAILABLE' });
      expect(!decided.ok && decided.detail).toMatch(/ap_stopped.*may or may not have been recorded.*Deciding again is safe/);
      expect(client.waitCounts()).toEqual(before);
    } finally {
      own.signal('SIGCONT');
    }
    expect(await client.result('looked', { ...who })).toMatchObject({ callId: 'looked', status: 'queued' });
  });
});
