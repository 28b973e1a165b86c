import { Queue } from 'bullmq';
import { afterAll, expect, it } from 'vitest';
import { callKey } from '../../src/contracts/call-identity.ts';
import { shardOf } from '../../src/contracts/database-id.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { deleteKeys, sandbox } from '../helpers/harness.ts';

// A call whose job vanished from Redis while its caller waited (Redis came back empty) was
// answered NO_WORKER, "withdrawn and did not run" — but a worker may have run it before Redis
// lost it: in a review under faults (Redis SIGKILLed and restarted empty mid-stream of 240
// own-id calls) a write answered so had committed, in 2 runs of 2. It answers UNAVAILABLE,
// `mayStillRun`, telling the caller to send it again under its id; that re-send runs it once.

const sb = sandbox({ SHARD_COUNT: '2' });
afterAll(() => sb.cleanup());
const settings = { database: 'agent' as const };
const call = { workspace: 'w', agent: 'a', settings, callId: 'lost-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } };

it('a waited call whose job Redis lost answers UNAVAILABLE (may have run), not NO_WORKER', async () => {
  const client = sb.client();
  const keys = keysFor(sb.config.prefix);
  const queue = new Queue(keys.queueName(shardOf('w/a', 2)), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
  try {
    const answer = client.call(call, { timeoutMs: 1000 });
    // No worker yet: once the job is queued, Redis loses every key of this deployment.
    while ((await queue.getJobState(callKey('w', 'a', 'lost-1'))) !== 'waiting') await new Promise((r) => setImmediate(r));
    await deleteKeys(sb.config.prefix);
    expect(await answer).toMatchObject({
      ok: false,
      callId: 'lost-1',
      mayStillRun: true,
      error: { code: 'UNAVAILABLE', message: expect.stringContaining('may have run') },
    });
  } finally {
    await queue.close();
  }
  // Sent again under its id once a worker is there: it runs, once.
  await sb.pool();
  expect(await client.call(call)).toMatchObject({ ok: true });
  expect(await client.call(call)).toMatchObject({ ok: true });
});
