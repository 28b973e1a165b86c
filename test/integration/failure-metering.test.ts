import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';

let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  // The deadline also bounds the CREATE TABLE that sets up the first case: at 300 ms it ran out
  // on a machine at load 11 (a database's first write also starts its history). FOREVER still
  // reaches any deadline, so a longer one costs only its own wait.
  sb = sandbox({ STATEMENT_TIMEOUT_MS: '1000' });
  await sb.pool();
  client = sb.client();
});
afterAll(() => sb.cleanup());

const settings = { database: 'agent' as const };

async function call(agent: string, tool: string, args: unknown): Promise<Envelope> {
  return (await client.call({ workspace: 'meter', agent, settings, tool, arguments: args })) as Envelope;
}

async function usageOf(agent: string) {
  const redis = connectRedis(sb.config.redisUrl);
  try {
    return (await readUsage(redis, keysFor(sb.config.prefix), 'meter'))
      .filter((r) => r.agent === agent)
      .map(({ tool, calls, credits }) => ({ tool, calls, credits }));
  } finally {
    redis.disconnect();
  }
}

const codeOf = (env: Envelope) => (env.ok ? 'ok' : env.error.code);

describe('failing at no cost', () => {
  it('meters a statement stopped at its deadline like a completed call of its tool', async () => {
    expect(codeOf(await call('slow', 'DATA_WRITE_SQL', { sql: 'CREATE TABLE t (x)' }))).toBe('ok');
    expect(codeOf(await call('slow', 'DATA_QUERY_SQL', { sql: FOREVER }))).toBe('STATEMENT_TIMEOUT');
    expect(codeOf(await call('slow', 'DATA_WRITE_SQL', { sql: `INSERT INTO t ${FOREVER}` }))).toBe('STATEMENT_TIMEOUT');
    expect(await usageOf('slow')).toEqual([
      { tool: 'DATA_QUERY_SQL', calls: 1, credits: 1 },
      { tool: 'DATA_WRITE_SQL', calls: 2, credits: 4 },
    ]);
  });

  it('meters a statement stopped for its memory (RESOURCE_LIMIT) like a completed call of its tool', async () => {
    expect(codeOf(await call('greedy', 'DATA_QUERY_SQL', { sql: 'SELECT randomblob(900000000)' }))).toBe('RESOURCE_LIMIT');
    expect(await usageOf('greedy')).toEqual([{ tool: 'DATA_QUERY_SQL', calls: 1, credits: 1 }]);
  });

  it('still meters nothing for a call refused before it ran', async () => {
    expect(codeOf(await call('refused', 'DATA_QUERY_SQL', { sql: 'PRAGMA table_list' }))).toBe('SQL_REFUSED');
    expect(codeOf(await call('refused', 'DATA_QUERY_SQL', { sql: 'SELECT * FROM missing' }))).toBe('SQL_ERROR');
    expect(await usageOf('refused')).toEqual([]);
  });
});
