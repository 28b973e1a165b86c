import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CallInput } from '../../src/contracts/call.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A call waited for while Redis restarts within the outage grace (3 s): once the client's
// connection is back it looks at the job at once, not at its next look `timeoutMs` later (30 s by
// default; 300 s here, past the test's own timeout).
let own: OwnRedis;
let sb: Sandbox;
beforeEach(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: own.url });
});
afterEach(async () => {
  await sb.cleanup();
  await own.remove();
});

const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const write: CallInput = { ...who, callId: 'w-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } };

describe('a waited call when Redis comes back', () => {
  it('answers at once that its job is gone, and that it may have run, when Redis came back empty', async () => {
    const client = sb.client();
    // No worker: the job waits in Redis until Redis loses it.
    const answer = client.call(write, { timeoutMs: 300_000 });
    await vi.waitFor(() => expect(client.waitCounts().looks).toBe(1), { timeout: 10_000 });
    await own.kill();
    own.wipe();
    await own.start();
    expect(await answer).toMatchObject({
      ok: false,
      callId: 'w-1',
      mayStillRun: true,
      error: { code: 'UNAVAILABLE', message: expect.stringContaining('job is gone from Redis') },
    });
    expect(client.waitCounts()).toEqual({ calls: 0, waits: 0, looks: 0 });
  }, 30_000);

  it('goes on waiting when Redis came back with the job (AOF), and answers its outcome once a worker runs it', async () => {
    const client = sb.client();
    const answer = client.call(write, { timeoutMs: 300_000 });
    await vi.waitFor(() => expect(client.waitCounts().looks).toBe(1), { timeout: 10_000 });
    await own.kill();
    await own.start();
    // The look made on reconnecting found the job waiting; one look stays scheduled.
    await vi.waitFor(() => expect(client.waitCounts()).toEqual({ calls: 1, waits: 1, looks: 1 }), { timeout: 10_000 });
    await sb.pool();
    expect(await answer).toMatchObject({ ok: true, callId: 'w-1' });
  }, 30_000);
});
