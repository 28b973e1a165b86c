import { afterAll, describe, expect, it } from 'vitest';
import { sandbox } from '../helpers/harness.ts';
import { freePort } from '../helpers/own-redis.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// `agentdb start --http-only` (or START_WORKERS=off): the HTTP API with no shard worker in its
// process, beside `agentdb worker` processes that own the shards (session 38, M5).
const sb = sandbox();
afterAll(() => sb.cleanup());

describe('agentdb start --http-only beside agentdb worker', () => {
  it('owns no shard, is ready only while a worker owns every shard, and serves /v1/calls and /mcp through that worker', async () => {
    const cli = (...args: string[]) => runCli(args, sb.env);
    expect((await cli('workspaces', 'set', '--workspace', 'acme', '--plan', 'business')).code).toBe(0);
    expect((await cli('agents', 'set', '--workspace', 'acme', '--agent', 'scout', '--database', 'agent')).code).toBe(0);
    const minted = await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'scout', '--json');
    const key = (JSON.parse(minted.stdout) as { key: string }).key;
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const ready = async () => {
      const res = await fetch(`${base}/ready`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };

    const api = await startCli(['start', '--http-only'], { ...sb.env, PORT: String(port) });
    let worker: Awaited<ReturnType<typeof startCli>> | undefined;
    try {
      expect(api.readyLog).toMatch(/"shards":0,"httpOnly":true.*"msg":"agentdb ready"/);
      // No worker anywhere yet: calls would wait, so not ready, naming every shard.
      expect(await ready()).toEqual({
        status: 503,
        body: { ready: false, reason: 'shards', message: expect.stringContaining('0, 1, 2, 3'), shardsWithoutOwner: [0, 1, 2, 3] },
      });

      worker = await startCli(['worker'], sb.env);
      expect(await ready()).toEqual({ status: 200, body: { ready: true, shardCount: 4, ownedShards: [] } });
      const health = await fetch(`${base}/health`);
      expect(await health.json()).toMatchObject({ ok: true, ownedShards: [] });

      const v1 = await fetch(`${base}/v1/calls`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 40 + 2 AS n' } }),
      });
      expect(await v1.json()).toMatchObject({ ok: true, result: { rows: [[42]] } });
      const mcp = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 6 * 7 AS n' } } }),
      });
      expect(await mcp.json()).toMatchObject({ result: { isError: false, structuredContent: { rows: [[42]] } } });

      // The worker stops and gives its leases back: not ready again.
      await stop(worker);
      worker = undefined;
      expect(await ready()).toMatchObject({ status: 503, body: { reason: 'shards', shardsWithoutOwner: [0, 1, 2, 3] } });
    } finally {
      if (worker) await stop(worker);
      await stop(api);
    }
  });

  it('START_WORKERS=off starts the same way without the flag', async () => {
    const port = await freePort();
    const api = await startCli(['start'], { ...sb.env, PORT: String(port), START_WORKERS: 'off' });
    try {
      expect(api.readyLog).toMatch(/"shards":0,"httpOnly":true/);
    } finally {
      await stop(api);
    }
  });
});
