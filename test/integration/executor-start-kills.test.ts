import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { loadConfig } from '../../src/config.ts';
import { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Executor children SIGKILLed while they start (an OOM killer, an operator's kill) made the pool
// answer every call INTERNAL "the database process could not start" after one failed start, and
// the call id kept that answer: in a kill storm 296 writes got it (review of issue 25).

const KILLING_CHILD = { file: fileURLToPath(new URL('../helpers/start-killed-child.mjs', import.meta.url)), execArgv: [] };
const kills = mkdtempSync(path.join(os.tmpdir(), 'agentdb-start-kills-'));
let sb: Sandbox;
let pool: ShardWorkerPool;
let client: AgentDbClient;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const insert = (callId: string) => ({ ...who, callId, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [callId] } });

/** SIGKILLs every child of this process: the pool's executor children and its spare. */
function killChildren(): number {
  let pids: number[] = [];
  try {
    pids = execFileSync('ps', ['-o', 'pid=', '--ppid', String(process.pid)])
      .toString()
      .split('\n')
      .map(Number)
      .filter((p) => p > 0);
  } catch {
    // none
  }
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  return pids.length;
}

async function values(): Promise<unknown[]> {
  const read = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t ORDER BY v', max_rows: 1000 } });
  expect(read).toMatchObject({ ok: true });
  return (read as unknown as { result: { rows: unknown[][] } }).result.rows.map(([v]) => v);
}

beforeAll(async () => {
  process.env.AGENTDB_TEST_START_KILLS = kills;
  sb = sandbox({ SHARD_COUNT: '1', EXECUTOR_POOL_SIZE: '2', EXECUTOR_OVERFLOW: '1' });
  pool = new ShardWorkerPool({ config: loadConfig(sb.env), shards: [0], logger: pino({ level: 'silent' }), executorChild: KILLING_CHILD });
  await pool.start();
  client = sb.client();
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })).toMatchObject({ ok: true });
});
afterAll(async () => {
  rmSync(path.join(kills, 'always'), { force: true });
  await pool.stop();
  await sb.cleanup();
  rmSync(kills, { recursive: true, force: true });
  delete process.env.AGENTDB_TEST_START_KILLS;
});

describe('executor children killed while they start', () => {
  it('are started again, and the writes waiting for them run on the next child', async () => {
    // The next four children to start die before they are ready: each of the two places sees
    // at least one start fail (the spare, killed too, comes back through the same module).
    for (let i = 0; i < 4; i++) writeFileSync(path.join(kills, `kill-${i}`), '');
    expect(killChildren()).toBeGreaterThanOrEqual(2);
    const ids = ['s-0', 's-1', 's-2', 's-3', 's-4'];
    const answers = await Promise.all(ids.map((id) => client.call(insert(id))));
    for (const a of answers) expect(a).toMatchObject({ ok: true, result: { changes: 1 } });
    // The kills did land on starting children.
    await expect.poll(() => readdirSync(kills).length).toBe(0);
    expect(await values()).toEqual(ids);
  });

  it('that cannot start at all answer UNAVAILABLE, not INTERNAL, and the same call id runs once they can', async () => {
    writeFileSync(path.join(kills, 'always'), '');
    killChildren();
    const failed = await client.call(insert('b-0'));
    expect(failed).toMatchObject({ ok: false, callId: 'b-0', error: { code: 'UNAVAILABLE', message: expect.stringContaining('could not start') } });
    expect(await client.result('b-0', who)).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });

    rmSync(path.join(kills, 'always'));
    // Every place tries again on its own (each second) and fills: the pool's two and the
    // overflow lane's one (EXECUTOR_OVERFLOW).
    await expect.poll(() => pool.executorPids.length, { timeout: 10_000 }).toBe(3);
    const again = await client.call(insert('b-0'));
    expect(again).toMatchObject({ ok: true, callId: 'b-0', result: { changes: 1 } });
    expect(await client.result('b-0', who)).toEqual(again);
    expect(await client.call(insert('b-0'))).toEqual(again);
    expect((await values()).filter((v) => v === 'b-0')).toHaveLength(1);
  });
});
