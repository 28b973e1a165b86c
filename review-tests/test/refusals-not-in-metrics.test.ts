import { afterAll, beforeAll, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.ts';
import { sandbox, type Sandbox } from '../../test/helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../../test/helpers/keyed-app.ts';

// H5 (medium; fixed on f-H in c77f1eb). agentdb_quota_refusals_total's help names RATE_LIMITED
// and QUOTA_EXCEEDED, and issue 27 asks for "quota and rate refusals", but only DISK_QUOTA was
// counted: the client refuses the other two before any worker sees the call, and the workers'
// agentdb_calls_total never has them. Measured on `agentdb start`: after 5 RATE_LIMITED and 260
// QUOTA_EXCEEDED answers, /metrics showed agentdb_quota_refusals_total with no sample at all.
let sb: Sandbox;
let k: KeyedApp;
const metrics = new Metrics();
beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // On main KeyedCalls takes no second argument: nothing is told of a refusal.
  k = keyedApp(sb, { rateLimits: { windowS: 600, keyCalls: 2, workspaceCalls: 100 }, onRefused: (quota: string) => metrics.refusals.inc({ quota }) } as never);
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

it('counts RATE_LIMITED answers of keyed calls in agentdb_quota_refusals_total', async () => {
  const key = await k.agentKey('evil', 'a1', { displayName: 'A', settings: { database: 'agent' } });
  const post = () =>
    k.app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: `Bearer ${key}` }, payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } } });
  const codes = [];
  for (let i = 0; i < 5; i++) codes.push((await post()).statusCode);
  expect(codes).toEqual([200, 200, 429, 429, 429]);
  expect(await metrics.text()).toContain('agentdb_quota_refusals_total{quota="rate"} 3');
});
