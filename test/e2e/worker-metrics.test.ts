import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort } from '../helpers/own-redis.ts';
import { startCli, stop } from '../helpers/processes.ts';

// Issue 27 part 6: a separate `agentdb worker` served no /metrics, so the calls it finished, its
// executor children and its history capture were seen nowhere. With WORKER_METRICS_PORT it
// serves its own, behind the same METRICS_TOKEN.
const TOKEN = 'worker-metrics-token-0123';
let sb: Sandbox;
let worker: ChildProcess;
let port: number;

beforeAll(async () => {
  port = await freePort();
  sb = sandbox({ METRICS_TOKEN: TOKEN, WORKER_METRICS_PORT: String(port) });
  worker = await startCli(['worker'], sb.env);
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

const scrape = (token = TOKEN, url = '/metrics') => fetch(`http://127.0.0.1:${port}${url}`, { headers: { authorization: `Bearer ${token}` } });

describe('agentdb worker with WORKER_METRICS_PORT', () => {
  it('serves its own calls, executor children, shards and capture lag at /metrics, only with the token', async () => {
    const client = sb.client();
    const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (n INTEGER)' } })).toMatchObject({ ok: true });
    expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT nope FROM t' } })).toMatchObject({ ok: false });

    expect((await scrape('wrong-token-wrong-token')).status).toBe(401);
    expect((await scrape(TOKEN, '/v1/calls')).status).toBe(404);
    const res = await scrape();
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('agentdb_calls_total{tool="DATA_WRITE_SQL",outcome="ok"} 1');
    expect(text).toContain('agentdb_calls_total{tool="DATA_QUERY_SQL",outcome="SQL_ERROR"} 1');
    // Timed too, counted once its completion has gone out (call-job-processor.ts).
    expect(text).toContain('agentdb_call_duration_seconds_count{tool="DATA_WRITE_SQL"} 1');
    expect(text).toContain('agentdb_call_duration_seconds_count{tool="DATA_QUERY_SQL"} 1');
    expect(text).toMatch(/^agentdb_owned_shards 4$/m);
    expect(text).toMatch(/^agentdb_executor_children\{state="idle"\} \d+$/m);
    expect(text).toMatch(/^agentdb_history_capture_lag_seconds 0$/m);
  });
});
