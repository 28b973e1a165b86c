import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// `agentdb call --call-id` against two `agentdb worker` processes, one per shard, and a
// redis-server of the test's own that is killed and started again empty (no AOF left): the call
// id's first call must keep it (the call-id ledger beside the data), whichever worker runs the
// next call under it. Before, a write under a used id into the other database ran as a second
// call, and the first call's re-send answered IDEMPOTENCY_CONFLICT although it had run.

let own: OwnRedis;
let sb: Sandbox;
const workers: ChildProcess[] = [];
const who = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"workspace","sharedData":true}'];
const insert = (v: string, scope?: 'workspace') => JSON.stringify({ sql: 'INSERT INTO t (v) VALUES (?)', params: [v], ...(scope ? { scope } : {}) });

async function call(args: string[]): Promise<{ code: number | null; env: Record<string, unknown> }> {
  const run = await runCli(['call', ...who, ...args], sb.env);
  return { code: run.code, env: JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, unknown> };
}

async function rows(scope?: 'workspace'): Promise<unknown> {
  const { env } = await call(['DATA_QUERY_SQL', JSON.stringify({ sql: 'SELECT v FROM t ORDER BY rowid', ...(scope ? { scope } : {}) })]);
  return (env as { result?: { rows: unknown } }).result?.rows;
}

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ SHARD_COUNT: '2', REDIS_URL: own.url, EXECUTOR_POOL_SIZE: '1' });
  expect(shardOf('acme/scout', 2)).not.toBe(shardOf('acme', 2));
  workers.push(await startCli(['worker', '--shards', '0'], sb.env), await startCli(['worker', '--shards', '1'], sb.env));
  for (const scope of [undefined, 'workspace'] as const) {
    const made = await call(['DATA_WRITE_SQL', JSON.stringify({ sql: 'CREATE TABLE t (v TEXT)', ...(scope ? { scope } : {}) })]);
    expect(made.env).toMatchObject({ ok: true });
  }
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((w) => stop(w)));
  await sb.cleanup();
  await own.remove();
});

describe('agentdb call --call-id after Redis came back empty', () => {
  it('refuses the id for a write into the other database, and the first call sent again answers what it did, once', async () => {
    const first = await call(['--call-id', 'X', 'DATA_WRITE_SQL', insert('first')]);
    expect(first).toMatchObject({ code: 0, env: { ok: true, result: { changes: 1 } } });

    await own.kill();
    own.wipe();
    await own.start();

    const other = await call(['--call-id', 'X', 'DATA_WRITE_SQL', insert('other', 'workspace')]);
    expect(other).toMatchObject({ code: 1, env: { ok: false, callId: 'X', error: { code: 'IDEMPOTENCY_CONFLICT' } } });
    expect(await call(['--call-id', 'X', 'DATA_WRITE_SQL', insert('first')])).toEqual(first);
    expect(await call(['--call-id', 'X', 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'])).toMatchObject({ code: 1, env: { error: { code: 'IDEMPOTENCY_CONFLICT' } } });
    expect(await rows()).toEqual([['first']]);
    expect(await rows('workspace')).toEqual([]);
  }, 90_000);
});
