import Database from 'better-sqlite3';
import { Job, Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { holds } from '../helpers/kill-in-statement.ts';
import { callInFile } from '../helpers/one-child-agent.ts';

// Issue 25 part 6(b): executor children SIGKILLed at random points around commits (before the
// write reaches a child, while it runs, just after it commits) and while idle, through the queue
// as a caller sees it. After each kill the answer is compared with the rows in the file and with
// `_agentdb_calls`, and the call is sent again under its id.

const ROUNDS = 16;
/** Rows of a bulk insert: long enough (tens of ms) for a kill to land inside it. */
const BULK = 20_000;
const INSERT = 'INSERT INTO t (call, n) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT ?, x FROM c';
const who = { workspace: 'faults', agent: 'a', settings: { database: 'agent' as const } };

let sb: Sandbox;
let worker: ShardWorkerPool;
let client: AgentDbClient;
let file: string;
let queue: Queue;

beforeAll(async () => {
  // One child (and its spare): the one a kill hits is the one running the write. No overflow
  // lane: its child is listed after the pooled one, so while the pooled place starts a child
  // the lane's was `executorPids[0]`, and a kill meant for a record's lookup hit it idle (the
  // second case's run that failed at load 19 ran out of kills so). A checkpoint after every
  // commit, before its answer leaves, widens the moment just after a commit.
  sb = sandbox({ EXECUTOR_POOL_SIZE: '1', EXECUTOR_OVERFLOW: '0', HISTORY_CHECKPOINT_BYTES: '4096' });
  worker = await sb.pool();
  client = sb.client();
  const shard = shardOf(`${who.workspace}/${who.agent}`, sb.config.shardCount);
  file = databasePath(sb.dataDir, who.workspace, who.agent, shard);
  const keys = keysFor(sb.config.prefix);
  queue = new Queue(keys.queueName(shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
});
afterAll(async () => {
  await queue.close();
  await sb.cleanup();
});

const call = async (input: Partial<CallInput> & Pick<CallInput, 'tool' | 'arguments'>) => (await client.call({ ...who, ...input })) as Envelope;

/** What the file holds for call `callId`: its rows, and whether its exactly-once record exists. */
const inFile = (callId: string) => callInFile(file, who, callId);

function killChild(): void {
  const pid = worker.executorPids[0];
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone: the kill before it is still being handled.
  }
}

describe('executor children killed around commits', () => {
  it('never loses or doubles an acknowledged write, never fails a committed one, and a re-send tells the same truth', async () => {
    expect(await call({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (call TEXT, n INTEGER)' } })).toMatchObject({ ok: true });
    const acknowledged = new Map<string, number>();
    const seen = { ok: 0, failed: 0 };
    for (let i = 0; i < ROUNDS; i++) {
      const kind = (['before', 'during', 'after', 'idle'] as const)[i % 4]!;
      const size = i % 2 === 1 ? BULK : 1;
      const callId = `w${i}`;
      const input = { callId, tool: 'DATA_WRITE_SQL', arguments: { sql: INSERT, params: [size, callId] } };
      let answer: Envelope;
      if (kind === 'idle') {
        killChild();
        // The statement that comes next is innocent: it runs on a fresh child.
        const innocent = await call({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } });
        expect(innocent, `round ${i}: the read after an idle kill`).toMatchObject({ ok: true });
        answer = await call(input);
      } else {
        const pending = call(input);
        // The kill's moment is what this test varies: a random delay, not a wait for an event.
        const [from, to] = kind === 'before' ? [0, 3] : kind === 'during' ? [3, 30] : [30, 80];
        await new Promise((r) => setTimeout(r, from + Math.random() * (to - from)));
        killChild();
        answer = await pending;
      }

      const found = inFile(callId);
      expect([0, size], `round ${i} (${kind}): all of the write or none`).toContain(found.rows);
      expect(found.recorded, `round ${i} (${kind}): the record commits with the rows`).toBe(found.rows > 0);
      if (answer.ok) {
        seen.ok++;
        acknowledged.set(callId, size);
        expect(found.rows, `round ${i} (${kind}): an acknowledged write is there`).toBe(size);
        expect(answer.result).toMatchObject({ changes: size });
      } else {
        seen.failed++;
        // A kill from outside is not the statement's doing (RESOURCE_LIMIT): UNAVAILABLE, retryable.
        expect(['UNAVAILABLE', 'STATEMENT_TIMEOUT'], `round ${i} (${kind}): ${answer.error.message}`).toContain(answer.error.code);
        expect(found.rows, `round ${i} (${kind}): a write answered as failed did not commit`).toBe(0);
      }
      const again = await call(input);
      if (!answer.ok && answer.error.code === 'UNAVAILABLE') {
        // Retryable: sent again under its id it runs now, once.
        expect(again, `round ${i} (${kind}): the re-send of a killed write`).toMatchObject({ ok: true, result: { changes: size } });
        acknowledged.set(callId, size);
        expect(inFile(callId).rows).toBe(size);
      } else {
        // Sent again under its id: the same answer, and nothing written twice.
        expect(again, `round ${i} (${kind}): the re-send`).toEqual(answer);
        expect(inFile(callId).rows).toBe(found.rows);
      }
    }

    const outside = new Database(file, { readonly: true });
    const byCall = outside.prepare('SELECT call, count(*) AS n FROM t GROUP BY call').all() as { call: string; n: number }[];
    outside.close();
    expect(new Map(byCall.map((r) => [r.call, r.n]))).toEqual(acknowledged);
    expect(seen.ok + seen.failed).toBe(ROUNDS);
  });
  it('runs a write again when its record cannot be read after its child died, and answers what it committed', async () => {
    // Held open here, the snapshot makes every child that opens the file (to read the record)
    // wait in its checkpoint, where it is killed: the worker cannot tell, and fails the attempt.
    expect(await call({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE IF NOT EXISTS t (call TEXT, n INTEGER)' } })).toMatchObject({ ok: true });
    const snapshot = new Database(file, { readonly: true });
    snapshot.exec('BEGIN');
    snapshot.prepare('SELECT count(*) FROM t').get();
    const input = { callId: 'unsettled', tool: 'DATA_WRITE_SQL', arguments: { sql: INSERT, params: [1, 'unsettled'] } };
    const pending = call(input);
    await expect.poll(() => inFile('unsettled').rows, { interval: 5, timeout: 10_000 }).toBe(1);
    const job = () => Job.fromId(queue, callKey(who.workspace, who.agent, 'unsettled'));
    let last: number | undefined;
    for (let kills = 0; !(await job())?.failedReason; kills++) {
      expect(kills, 'kills before the attempt failed').toBeLessThan(12);
      await expect.poll(() => worker.executorPids[0] ?? last, { interval: 5, timeout: 10_000 }).not.toBe(last);
      last = worker.executorPids[0]!;
      // Killed once it has the file open, so it has read what it was sent (a child killed before
      // that passes it on unread) and marked it started: the write's child holds it already,
      // each fresh child opens it to read the record, and waits there in the checkpoint.
      const pid = last;
      await expect.poll(() => holds(pid, file), { interval: 5, timeout: 10_000 }).toBe(true);
      process.kill(last, 'SIGKILL');
    }
    snapshot.exec('COMMIT');
    snapshot.close();
    const answer = await pending;
    expect(answer).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(inFile('unsettled')).toEqual({ rows: 1, recorded: true });
    expect((await job())?.attemptsStarted, 'attempts').toBeGreaterThanOrEqual(2);
    expect(await call(input)).toEqual(answer);
  });
});
