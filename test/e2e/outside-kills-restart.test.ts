import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { sandbox } from '../helpers/harness.ts';
import { killChildInStatement } from '../helpers/kill-in-statement.ts';
import { startCli, stop } from '../helpers/processes.ts';

// A statement whose child is SIGKILLed from outside a second time within 10 minutes answers
// RESOURCE_LIMIT (session 34, F11: the OOM killer takes the child of the statement that takes
// the memory, each time it runs). The first kill was remembered in the worker's memory only: a
// worker started again between the two kills (or the shard gone to another worker) answered the
// second UNAVAILABLE, "try again", too, and the next try was killed again (session 35, F14).

const sb = sandbox({ EXECUTOR_POOL_SIZE: '1', EXECUTOR_OVERFLOW: '0', STATEMENT_TIMEOUT_MS: '60000', LEASE_TTL_MS: '1000' });
const running: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

/** A read long enough (a second or more of CPU) for a kill to land inside it. */
const COUNT = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000) SELECT count(*) FROM c';

async function startWorker(): Promise<ChildProcess> {
  const w = await startCli(['worker'], sb.env);
  running.push(w);
  return w;
}

describe('a statement killed from outside once, its worker started again, and killed again', () => {
  it('answers RESOURCE_LIMIT the second time, as within one worker', async () => {
    const client = sb.client();
    const input = {
      workspace: 'outside3',
      agent: 'a',
      settings: { database: 'agent' as const },
      callId: 'read-oom-restart',
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: COUNT },
    };
    const first = await startWorker();
    // Written once, so the database is a file a child opens to read it.
    expect(await client.call({ ...input, callId: 'made', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } })).toMatchObject({ ok: true });
    const file = databasePath(sb.dataDir, 'outside3', 'a', shardOf('outside3/a', sb.config.shardCount));
    const pending = client.call(input) as Promise<Envelope>;
    await killChildInStatement(first.pid!, file);
    expect(await pending).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });

    // The worker goes (a deploy, a crash) and another takes its shards.
    await stop(first, 'SIGKILL');
    const second = await startWorker();
    const again = client.call(input) as Promise<Envelope>;
    await killChildInStatement(second.pid!, file);
    // Main: UNAVAILABLE again, the first kill forgotten with the worker.
    expect(await again).toMatchObject({
      ok: false,
      error: { code: 'RESOURCE_LIMIT', message: expect.stringMatching(/killed from outside \(signal SIGKILL\) 2 times .* not run again/) },
    });
  }, 90_000);
});
