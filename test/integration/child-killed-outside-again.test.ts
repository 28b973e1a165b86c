import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { CallInput } from '../../src/contracts/call.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { killInStatement } from '../helpers/kill-in-statement.ts';
import { oneChildAgent } from '../helpers/one-child-agent.ts';

// A child SIGKILLed from outside during a statement answers UNAVAILABLE, retryable (session 33,
// F10): an operator's kill, or the kernel's OOM killer's. But on a host with less memory than a
// child's data-segment limit, the OOM killer kills the child of the statement that takes the
// memory every time it runs: sent again as the answer invites, the same statement was killed
// again, without end, each time UNAVAILABLE. The second kill of the same statement now answers
// RESOURCE_LIMIT (not retryable: a resend under its id answers it again and runs nothing), and a
// write is still answered by its record: committed, it answers ok, whatever killed it
// (session 34, F11).

/** Rows counted by a read long enough (a second or more of CPU) for a kill to land inside it. */
const COUNT = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000) SELECT count(*) FROM c';
/** A write that computes as long before it writes its one row. */
const SLOW_INSERT = `INSERT INTO t (call, n) SELECT ?, n FROM (${COUNT.replace('count(*)', 'count(*) AS n')})`;
const who = { workspace: 'outside2', agent: 'a', settings: { database: 'agent' as const } };

let worker: ShardWorkerPool;
let file: string;

const { call, inFile } = oneChildAgent(who, (_, w, f) => {
  worker = w;
  file = f;
});

/** Sends `input` and kills its child in its statement: its answer. */
async function killed(input: Pick<CallInput, 'tool' | 'arguments' | 'callId'>): Promise<Envelope> {
  const pending = call(input);
  await killInStatement(worker, 20_000);
  return pending;
}

describe('a statement whose child is SIGKILLed from outside each time it runs', () => {
  it('a read: UNAVAILABLE the first time, RESOURCE_LIMIT the second, and that answer stays', async () => {
    const input = { callId: 'read-oom', tool: 'DATA_QUERY_SQL', arguments: { sql: COUNT } };
    expect(await killed(input)).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    const second = await killed(input);
    expect(second).toMatchObject({
      ok: false,
      error: { code: 'RESOURCE_LIMIT', message: expect.stringMatching(/killed from outside \(signal SIGKILL\) 2 times .* not run again/) },
    });
    // Sent again under its id: the same answer, the statement not run a third time.
    expect(await call(input)).toEqual(second);
  });

  it('a write: RESOURCE_LIMIT "nothing of it was written" the second time, and nothing is', async () => {
    expect(await call({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (call TEXT, n INTEGER)' } })).toMatchObject({ ok: true });
    const input = { callId: 'write-oom', tool: 'DATA_WRITE_SQL', arguments: { sql: SLOW_INSERT, params: ['write-oom'] } };
    expect(await killed(input)).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    const second = await killed(input);
    expect(second).toMatchObject({
      ok: false,
      error: { code: 'RESOURCE_LIMIT', message: expect.stringMatching(/2 times .*before it committed: nothing of it was written/) },
    });
    expect(inFile('write-oom')).toEqual({ rows: 0, recorded: false });
    expect(await call(input)).toEqual(second);
    expect(inFile('write-oom')).toEqual({ rows: 0, recorded: false });
  });

  it('a write killed the second time after its commit answers what it committed, not the limit', async () => {
    const input = { callId: 'write-late', tool: 'DATA_WRITE_SQL', arguments: { sql: SLOW_INSERT, params: ['write-late'] } };
    expect(await killed(input)).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    // Held in the checkpoint after its commit by a reader here, then killed.
    const reader = new Database(file, { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM t').get();
    const written = call(input);
    await expect.poll(() => inFile('write-late').rows, { interval: 5, timeout: 30_000 }).toBe(1);
    const pid = worker.executorPids[0]!;
    process.kill(pid, 'SIGKILL');
    await expect.poll(() => worker.executorPids[0], { interval: 5, timeout: 10_000 }).not.toBe(pid);
    reader.exec('COMMIT');
    reader.close();
    const committed = await written;
    expect(committed).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await call(input)).toEqual(committed);
    expect(inFile('write-late')).toEqual({ rows: 1, recorded: true });
  });
});
