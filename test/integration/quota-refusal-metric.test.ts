import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// What `agentdb start` serves at /metrics as agentdb_quota_refusals_total{quota="redis"}: the
// refusals of the workspace's Redis budget, answered by the client before a call is taken. A
// write the worker refused past the workspace's byte quota (also QUOTA_EXCEEDED) was counted
// there too, pointing an operator at Redis for a full disk quota (review O1).
const QUOTA = 256 * 1024;
let sb: Sandbox;
let k: KeyedApp;
const metrics = new Metrics();
let key: string;

beforeAll(async () => {
  sb = sandbox({ WORKSPACE_MAX_BYTES: String(QUOTA) });
  await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
  k = keyedApp(sb, { onRefused: (quota) => metrics.refusals.inc({ quota }) });
  key = await k.agentKey('acme', 'filler', { displayName: 'F', settings: { database: 'agent' as const } });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const write = (sql: string) =>
  k.app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: `Bearer ${key}` }, payload: { tool: 'DATA_WRITE_SQL', arguments: { sql } } });
const fill = 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) INSERT INTO big SELECT NULL, randomblob(10000) FROM c';

describe('a write refused past the workspace byte quota', () => {
  it('is not counted as a refusal of the Redis budget', async () => {
    expect((await write('CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)')).json()).toMatchObject({ ok: true });
    let refused: unknown;
    for (let i = 0; i < 8 && !refused; i++) {
      const answer = (await write(fill)).json();
      if (!answer.ok) refused = answer;
    }
    expect(refused).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED', message: expect.stringContaining('WORKSPACE_MAX_BYTES') } });
    expect(await metrics.text()).not.toMatch(/agentdb_quota_refusals_total\{quota="redis"\} [1-9]/);
  });
});
