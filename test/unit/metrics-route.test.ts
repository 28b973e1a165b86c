import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { metricsRoute } from '../../src/http/metrics-route.ts';
import { Metrics } from '../../src/metrics.ts';

// GET /metrics is off without METRICS_TOKEN, and takes only that token; a gauge whose read fails
// is left out of the scrape, not the scrape's failure. Each Metrics has its own registry.
async function app(token?: string) {
  const metrics = new Metrics();
  metrics.calls.inc({ tool: 'DATA_QUERY_SQL', outcome: 'ok' });
  metrics.gauge('agentdb_test_broken', 'a read that fails', [], () => {
    throw new Error('redis down');
  });
  metrics.gauge('agentdb_test_shards', 'a read that answers', ['shard'], async () => [{ labels: { shard: 2 }, value: 5 }]);
  const a = Fastify();
  await a.register(metricsRoute({ metrics, ...(token ? { token } : {}) }));
  return a;
}

describe('GET /metrics', () => {
  it('says how to turn it on when METRICS_TOKEN is unset', async () => {
    const res = await (await app()).inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer anything-at-all-here' } });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: expect.stringContaining('set METRICS_TOKEN') } });
  });

  it('answers only the token, with the metrics in the text format', async () => {
    const a = await app('0123456789abcdef-token');
    for (const authorization of [undefined, 'Bearer 0123456789abcdef-tokeN', 'Basic 0123456789abcdef-token']) {
      const res = await a.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    }
    const res = await a.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer 0123456789abcdef-token' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toContain('agentdb_calls_total{tool="DATA_QUERY_SQL",outcome="ok"} 1');
    expect(res.body).toContain('agentdb_test_shards{shard="2"} 5');
    // Unknown, not 0: a Redis that did not answer is not "nothing pending".
    expect(res.body).toMatch(/^agentdb_test_broken nan$/im);
  });
});
