import type { ChildProcess } from 'node:child_process';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox } from '../helpers/harness.ts';
import { startCli, stop } from '../helpers/processes.ts';

// Review F1 (faults, session 26): a worker SIGKILLed between a write's commit and its metering
// left the write unmetered. The job's next run finds the write in its exactly-once record and
// answers it (a replay), and a replay was never metered, "metered the first time": but the first
// run died before it metered anything. 4 of 6,390 acknowledged writes went unmetered over three
// worker kills under load. A write is metered once: by whichever run announces it first.

const sb = sandbox({ STATEMENT_TIMEOUT_MS: '60000' });
const running: ChildProcess[] = [];
const redis = new Redis(sb.config.redisUrl);
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  redis.disconnect();
  await sb.cleanup();
});

const who = { workspace: 'meter', agent: 'a', settings: { database: 'agent' as const } };
const keys = keysFor(sb.config.prefix);

/** The call ids the worker's executor children are running, as it last published them. */
async function runningCalls(): Promise<string[]> {
  const ids: string[] = [];
  for (const worker of await redis.zrange(keys.executorsIndex, 0, -1)) {
    const status = await redis.get(keys.executorStatus(worker));
    if (!status) continue;
    for (const c of (JSON.parse(status) as { pool: { children: { callId?: string }[] } }).pool.children) if (c.callId) ids.push(c.callId);
  }
  return ids;
}

function rowsOf(file: string, id: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t WHERE id = ?').get(id) as { n: number }).n;
  } catch {
    return 0;
  } finally {
    db.close();
  }
}

async function writesMetered(): Promise<number> {
  return (await readUsage(redis, keys, who.workspace)).filter((r) => r.tool === 'DATA_WRITE_SQL').reduce((n, r) => n + r.calls, 0);
}

it('a write committed by a worker killed before it metered is metered by the run that answers it', async () => {
  const first = await startCli(['worker'], sb.env);
  running.push(first);
  const client = sb.client();
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (id TEXT, n INTEGER)' } })).toMatchObject({ ok: true });
  const file = databasePath(sb.dataDir, who.workspace, who.agent, shardOf(`${who.workspace}/${who.agent}`, sb.config.shardCount));
  const id = 'w-killed-before-meter';
  // Long enough to be seen running in the worker's status, published once a second
  // (PUBLISH_EVERY_MS): 3,000,000 steps took ~1.1 s on a quiet machine and could end unseen.
  const sql = 'INSERT INTO t SELECT ?, max(x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 15000000) SELECT x FROM c)';
  const answer = client.call({ ...who, tool: 'DATA_WRITE_SQL', callId: id, arguments: { sql, params: [id] } }, { timeoutMs: 60_000 });
  // The statement is in its executor child: the worker stops there, the child commits, and the
  // worker dies without having heard of it (SIGSTOP, then SIGKILL once the row is on disk).
  await expect.poll(runningCalls, { interval: 50, timeout: 30_000 }).toContain(id);
  first.kill('SIGSTOP');
  await expect.poll(() => rowsOf(file, id), { interval: 50, timeout: 30_000 }).toBe(1);
  await stop(first, 'SIGKILL');
  // The next worker runs the job again: its record answers the write, which ran once.
  await sb.pool();
  expect(await answer).toMatchObject({ ok: true, callId: id });
  expect(rowsOf(file, id)).toBe(1);
  expect(await writesMetered()).toBe(2);
  // Sent again under its id, the answer is the stored one, and nothing more is metered.
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', callId: id, arguments: { sql, params: [id] } })).toMatchObject({ ok: true });
  expect(await writesMetered()).toBe(2);
}, 120_000);
