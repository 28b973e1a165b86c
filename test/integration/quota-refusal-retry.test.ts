import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { isRetryable } from '../../src/errors.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Review L2: QUOTA_EXCEEDED was retryable whichever quota answered it. The disk quota's passes
// only as history ages out (days), so a caller looping on it wasted its calls; the Redis
// budget's passes when its oldest kept call expires, which the answer only wrote in its words.
const BUDGET = 256 * 1024;
// A result of ~40 KB, kept in its envelope in Redis (under MAX_RESULT_BYTES).
const BIG = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT i, printf('%.1000c','x') AS s FROM c";
let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(BUDGET), WORKSPACE_MAX_BYTES: '200000', RESULT_TTL_HOURS: '1' });
  await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
  client = sb.client();
});
afterAll(async () => {
  await sb.cleanup();
});

const who = (workspace: string) => ({ workspace, agent: 'scout', settings: { database: 'agent' as const } });
const refusalOf = (env: Envelope) => {
  if (env.ok || !('error' in env)) throw new Error(`expected a refusal, got ${JSON.stringify(env).slice(0, 300)}`);
  return env.error;
};

describe('QUOTA_EXCEEDED, by the quota that answered it', () => {
  it('is no code to send again as it is; the Redis budget says when with retryAfter, the disk quota says not to', async () => {
    expect(isRetryable('QUOTA_EXCEEDED')).toBe(false);

    let last: Envelope | undefined;
    for (let i = 0; i < 12; i++) {
      last = (await client.call({ ...who('hog'), tool: 'DATA_QUERY_SQL', arguments: { sql: BIG, max_rows: 100 } })) as Envelope;
      if (!last.ok) break;
    }
    const redis = refusalOf(last!);
    expect(redis.code).toBe('QUOTA_EXCEEDED');
    // Its oldest kept call expires within RESULT_TTL_HOURS (and the call's wait and approval's time).
    expect(redis.retryAfter).toBeGreaterThan(0);
    expect(redis.retryAfter).toBeLessThanOrEqual(3600 + 3 * 24 * 3600);
    expect(redis.hint).toMatch(/With `error\.retryAfter` \(the Redis budget\), send it again after that many seconds/);

    const write = (sql: string) => client.call({ ...who('fat'), tool: 'DATA_WRITE_SQL', arguments: { sql } }) as Promise<Envelope>;
    expect((await write('CREATE TABLE t (b BLOB)')).ok).toBe(true);
    expect((await write('INSERT INTO t SELECT randomblob(300000)')).ok).toBe(true);
    const disk = refusalOf(await write('INSERT INTO t VALUES (1)'));
    expect(disk.code).toBe('QUOTA_EXCEEDED');
    expect(disk.message).toMatch(/Writes refused: workspace fat holds \d+ bytes on disk/);
    expect(disk.retryAfter).toBeUndefined();
    expect(disk.hint).toMatch(/Without it \(the disk quota\), do not send it again as it is: room comes back only in days/);
  });
});
