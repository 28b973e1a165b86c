import Database from 'better-sqlite3';
import { afterAll, beforeAll } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { sandbox, type Sandbox } from './harness.ts';

/** An agent's settings as its calls carry them. */
type Who = { workspace: string; agent: string; settings: { database: 'agent' } };

/**
 * One agent's database served by a worker of one pooled child and no overflow lane, so that
 * `worker.executorPids[0]` is the child running its call (the kill-from-outside tests), with a
 * checkpoint after each commit, before its answer leaves. Made before the file's tests, cleaned up
 * after; `set` receives the sandbox, the worker and the database's file once made. Answers the agent's calls and what its
 * file holds of a call, read from outside.
 */
export function oneChildAgent(who: Who, set: (sb: Sandbox, worker: ShardWorkerPool, file: string) => void) {
  let sb: Sandbox | undefined;
  let client: AgentDbClient;
  let file: string;
  beforeAll(async () => {
    sb = sandbox({ EXECUTOR_POOL_SIZE: '1', EXECUTOR_OVERFLOW: '0', HISTORY_CHECKPOINT_BYTES: '4096', STATEMENT_TIMEOUT_MS: '60000' });
    const worker = await sb.pool();
    client = sb.client();
    file = databasePath(sb.dataDir, who.workspace, who.agent, shardOf(`${who.workspace}/${who.agent}`, sb.config.shardCount));
    set(sb, worker, file);
  });
  afterAll(() => sb?.cleanup());
  return {
    /** The agent's call of `input`: its answer. */
    call: async (input: Pick<CallInput, 'tool' | 'arguments' | 'callId'>) => (await client.call({ ...who, ...input })) as Envelope,
    /** The rows of table `t` whose `call` column is `callId`, and whether the call is recorded as committed. */
    inFile: (callId: string) => callInFile(file, who, callId),
  };
}

/** The rows of table `t` in `file` whose `call` column is `callId`, and whether `who`'s call is recorded as committed, read from outside. */
export function callInFile(file: string, who: { workspace: string; agent: string }, callId: string): { rows: number; recorded: boolean } {
  const outside = new Database(file, { readonly: true });
  try {
    const rows = (outside.prepare('SELECT count(*) AS n FROM t WHERE call = ?').get(callId) as { n: number }).n;
    const recorded = outside.prepare('SELECT 1 FROM _agentdb_calls WHERE call_id = ?').get(callKey(who.workspace, who.agent, callId)) !== undefined;
    return { rows, recorded };
  } finally {
    outside.close();
  }
}
