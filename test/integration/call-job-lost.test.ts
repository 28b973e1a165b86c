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
// A call a worker had already taken when its job vanished never answered at all: the wait's
// look at the job settled only 'completed' or 'failed', and found 'unknown' for ever.

const sb = sandbox({ SHARD_COUNT: '2', STATEMENT_TIMEOUT_MS: '15000' });
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

it('a taken call whose job Redis lost answers UNAVAILABLE (may have run) at its next look, not never', async () => {
  const client = sb.client();
  const keys = keysFor(sb.config.prefix);
  const queue = new Queue(keys.queueName(shardOf('w/b', 2)), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
  const who = { workspace: 'w', agent: 'b', settings };
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE n (x)' } })).toMatchObject({ ok: true });
  // Runs until the statement timeout (15 s): the job stays taken ('active') meanwhile. Without
  // the look's answer, the call heard nothing until then (and for ever, had its worker died).
  const slow = 'INSERT INTO n WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
  try {
    const answer = client.call({ ...who, callId: 'taken-1', tool: 'DATA_WRITE_SQL', arguments: { sql: slow } }, { timeoutMs: 300 });
    while ((await queue.getJobState(callKey('w', 'b', 'taken-1'))) !== 'active') await new Promise((r) => setImmediate(r));
    // Past the client's first look at 300 ms (nothing to await: it is the client's own timer),
    // which found the job taken and left the call to its completion and the looks after.
    await new Promise((r) => setTimeout(r, 700));
    await deleteKeys(sb.config.prefix);
    expect(await answer).toMatchObject({
      ok: false,
      callId: 'taken-1',
      mayStillRun: true,
      error: { code: 'UNAVAILABLE', message: expect.stringContaining('may have run') },
    });
  } finally {
    await queue.close();
  }
});
