import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { historyDir } from '../../src/history/history-files.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { deleteKeys, type Sandbox, sandbox } from '../helpers/harness.ts';
import { growTmpfs, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// Session 34, F12 (F11's ledger run 4, `v1-9549`, answered STORAGE_FULL and in its database).
// POST /v1/calls sends a call without waiting (`wait: false`), then waits for its outcome by its
// id (`result` with `wait`). That wait, finding the call's job not finished, answered the
// outcome a worker had announced for the id within the last 5 s: the refusal of an earlier run
// (STORAGE_FULL, "nothing was written"), while the job it found, another run, then committed.
// Two ways to such a job: the refused job put back to run when the same call is sent again under
// its id; and (F11's run 4, 4.2 s apart) a Redis come back empty, the resend adding a new job.
// The worker is stopped across the resend so that the new run cannot come first: the wait must
// answer that run's outcome (ok), or that the call may still run; never the refusal before it.

const box: Sandbox = sandbox({ HISTORY_MAX_BEHIND_BYTES: String(256 * 1024), HISTORY_CHECKPOINT_BYTES: String(64 * 1024) });
// One database (agent) per case, each with its history on its own full 1 MB tmpfs.
const agents = ['scout', 'scribe'];
const mnts = agents.map((a) => historyDir(box.dataDir, `acme/${a}`));
for (const m of mnts) fs.mkdirSync(m, { recursive: true });
const refusedAt = mnts.map((m) => mountTmpfs(m, '1m'));
const refused = refusedAt.find((r) => r !== undefined);
if (refused) console.warn(`put-back-stale-answer.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);

describe.runIf(!refused)('a call put back to run after a retryable refusal, waited for by its id', () => {
  let client: AgentDbClient;
  let pool: ShardWorkerPool;

  beforeAll(async () => {
    pool = await box.pool();
    client = box.client();
    for (const agent of agents) {
      const made = await client.call({ ...whoOf(agent), tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (k INTEGER NOT NULL, v TEXT NOT NULL)' } });
      expect(made.ok, JSON.stringify(made)).toBe(true);
    }
  }, 60_000);

  afterAll(async () => {
    for (const [i, m] of mnts.entries()) if (refusedAt[i] === undefined) unmountTmpfs(m);
    await box.cleanup();
  });

  const whoOf = (agent: string) => ({ workspace: 'acme', agent, settings: { database: 'agent' as const } });
  const argsOf = (k: number) => ({ sql: 'INSERT INTO t (k, v) VALUES (?, ?)', params: [k, 'x'.repeat(3000)] });
  const count = async (agent: string, k: number) => {
    const out = await client.call({ ...whoOf(agent), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t WHERE k = ?', params: [k] } });
    expect(out.ok, JSON.stringify(out)).toBe(true);
    return (out as unknown as { result: { rows: unknown[][] } }).result.rows[0]![0];
  };

  /** Refused, then sent again with no worker after `between`, and waited for by its id as POST /v1/calls does. */
  const refusedThenResent = async (agent: string, between: () => Promise<void>) => {
    const insert = { ...whoOf(agent), tool: 'DATA_WRITE_SQL' as const };
    let full: number | undefined;
    for (let k = 0; k < 2000 && full === undefined; k++) {
      const out = await client.call({ ...insert, callId: `${agent}-${k}`, arguments: argsOf(k) });
      if (!out.ok) {
        expect(out).toMatchObject({ error: { code: 'STORAGE_FULL' } });
        full = k;
      }
    }
    expect(full, 'no write was refused: the bound was never reached').toBeDefined();
    const callId = `${agent}-${full}`;
    // No worker while the call is sent again: its new run waits for the one started below.
    await pool.stop();
    await between();
    growTmpfs(mnts[agents.indexOf(agent)]!, '64m');
    const sent = await client.call({ ...insert, callId, arguments: argsOf(full!) }, { wait: false, timeoutMs: 200 });
    expect(sent, JSON.stringify(sent)).toMatchObject({ ok: false, status: 'queued' });
    const waited = client.result(callId, { workspace: 'acme', agent, wait: true, timeoutMs: 60_000 });
    pool = await box.pool();
    const answer = await waited;
    // Sent again: the id answers the committed write, once.
    const again = await client.call({ ...insert, callId, arguments: argsOf(full!) });
    expect(again, JSON.stringify(again)).toMatchObject({ ok: true, result: { changes: 1 } });
    const there = await count(agent, full!);
    expect(there).toBe(1);
    // The new run committed (room is back): the wait's answer is its ok, or at least "may still run".
    const mayStillRun = !answer.ok && 'error' in answer && answer.error.code === 'UNAVAILABLE' && answer.mayStillRun === true;
    expect(answer.ok || mayStillRun, `answered ${JSON.stringify(answer)}, and its row is there (${there})`).toBe(true);
  };

  it('answers the run it was put back for, not the refusal of the run before', { timeout: 120_000 }, async () => {
    await refusedThenResent('scout', async () => undefined);
  });

  it('answers the new job of a Redis come back empty, not the refusal its id had before', { timeout: 120_000 }, async () => {
    // This sandbox's keys (its own prefix) gone: Redis came back empty, as in an `empty` fault.
    await refusedThenResent('scribe', () => deleteKeys(box.config.prefix));
  });
});
