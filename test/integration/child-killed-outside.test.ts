import fs from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { readUsage } from '../../src/calls/usage.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { killInStatement } from '../helpers/kill-in-statement.ts';
import { oneChildAgent } from '../helpers/one-child-agent.ts';

// An executor child SIGKILLed from outside (an operator, the kernel's OOM killer) in the middle
// of a call, through the queue as a caller sees it. Such a kill is not the statement's doing:
// a read, and a write its record says did not commit, answer UNAVAILABLE (retryable, not
// metered, run again when sent again under the id), not RESOURCE_LIMIT "it used too much
// memory" (not retryable, metered: what main answered). A write killed after its commit answers
// what it committed.

/** Rows counted by a read long enough (a second or more of CPU) for a kill to land inside it. */
const COUNT = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000) SELECT count(*) FROM c';
/** Rows of an insert long enough for a kill to land before its commit. */
const BULK = 3_000_000;
const INSERT = 'INSERT INTO t (call, n) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT ?, x FROM c';
const who = { workspace: 'outside', agent: 'a', settings: { database: 'agent' as const } };

let sb: Sandbox;
let worker: ShardWorkerPool;
let file: string;

const { call, inFile } = oneChildAgent(who, (s, w, f) => {
  sb = s;
  worker = w;
  file = f;
});

async function usage(): Promise<{ tool: string; calls: number }[]> {
  const redis = connectRedis(sb.config.redisUrl);
  try {
    return (await readUsage(redis, keysFor(sb.config.prefix), who.workspace)).map(({ tool, calls }) => ({ tool, calls }));
  } finally {
    redis.disconnect();
  }
}

describe('an executor child SIGKILLed from outside during a call', () => {
  it('answers a read UNAVAILABLE, retryable and not metered, and runs it when sent again under its id', async () => {
    const input = { callId: 'read-1', tool: 'DATA_QUERY_SQL', arguments: { sql: COUNT } };
    const pending = call(input);
    await killInStatement(worker);
    const answer = await pending;
    expect(answer).toMatchObject({
      ok: false,
      error: { code: 'UNAVAILABLE', message: expect.stringMatching(/killed from outside \(signal SIGKILL.*nothing was changed/) },
    });
    expect(await usage(), 'not metered').toEqual([]);
    expect(await call(input), 'sent again under its id').toMatchObject({ ok: true, result: { rows: [[10_000_000]] } });
  });

  it('answers a write killed before its commit UNAVAILABLE "nothing of it was written", and one killed after it with what it committed', async () => {
    expect(await call({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (call TEXT, n INTEGER)' } })).toMatchObject({ ok: true });
    const metered = await usage();

    // Before its commit: the record says it did not commit, and that is what it answers.
    const before = { callId: 'before-commit', tool: 'DATA_WRITE_SQL', arguments: { sql: INSERT, params: [BULK, 'before-commit'] } };
    const pending = call(before);
    // Killed once its statement has spilled pages to the WAL (megabytes before its commit): by
    // CPU alone, the previous commit's copy into history could pass for it under load.
    const wal = `${file}-wal`;
    await expect.poll(() => fs.statSync(wal, { throwIfNoEntry: false })?.size ?? 0, { interval: 5, timeout: 30_000 }).toBeGreaterThan(4 * 1024 * 1024);
    process.kill(worker.executorPids[0]!, 'SIGKILL');
    const answer = await pending;
    expect(answer).toMatchObject({
      ok: false,
      error: { code: 'UNAVAILABLE', message: expect.stringMatching(/SIGKILL.*before it committed: nothing of it was written/) },
    });
    expect(inFile('before-commit')).toEqual({ rows: 0, recorded: false });
    expect(await usage(), 'not metered').toEqual(metered);
    // Retryable: sent again under its id it runs, once.
    expect(await call(before)).toMatchObject({ ok: true, result: { changes: BULK } });
    expect(inFile('before-commit')).toEqual({ rows: BULK, recorded: true });

    // After its commit, before its answer: held in the checkpoint by a reader here, then killed.
    const reader = new Database(file, { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM t').get();
    const after = { callId: 'after-commit', tool: 'DATA_WRITE_SQL', arguments: { sql: INSERT, params: [1, 'after-commit'] } };
    const written = call(after);
    await expect.poll(() => inFile('after-commit').rows, { interval: 5, timeout: 10_000 }).toBe(1);
    const pid = worker.executorPids[0]!;
    process.kill(pid, 'SIGKILL');
    // Let go once the worker heard of the death, or the next child's checkpoint waits too.
    await expect.poll(() => worker.executorPids[0], { interval: 5, timeout: 10_000 }).not.toBe(pid);
    reader.exec('COMMIT');
    reader.close();
    const committed = await written;
    expect(committed).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await call(after)).toEqual(committed);
    expect(inFile('after-commit')).toEqual({ rows: 1, recorded: true });
  });
});
