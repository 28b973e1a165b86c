import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/queue/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// The hostile review's flood, scaled down: whole-table updates of blobs against a 256 KiB quota.
const QUOTA = 256 * 1024;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox({ HISTORY_CAPTURE: 'on', HISTORY_CHECKPOINT_BYTES: String(64 * 1024), HISTORY_MAX_BYTES_PER_DB: String(QUOTA) });
  await sb.pool();
  client = sb.client();
});
afterAll(async () => {
  await sb.cleanup();
});

const call = (tool: string, args: Record<string, unknown>) => client.call({ ...who, tool, arguments: args });

describe('a database whose history passes HISTORY_MAX_BYTES_PER_DB', () => {
  it('refuses further writes with RESOURCE_LIMIT naming the quota, writing nothing; reads still work', async () => {
    expect((await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB, n INTEGER)' })).ok).toBe(true);
    expect((await call('DATA_WRITE_SQL', { sql: 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<8) INSERT INTO big SELECT i, randomblob(10000), 0 FROM c' })).ok).toBe(true);
    type Refusal = { ok: boolean; error?: { code: string; message?: string } };
    let refused: Refusal | undefined;
    let accepted = 0;
    for (let round = 1; round <= 40 && !refused; round++) {
      const env = await call('DATA_WRITE_SQL', { sql: 'UPDATE big SET b = randomblob(10000), n = ?', params: [round] });
      if (env.ok) accepted = round;
      else refused = env as unknown as Refusal;
    }
    expect(refused, 'the quota never refused a write').toBeDefined();
    expect(refused!.error, JSON.stringify(refused)).toMatchObject({ code: 'RESOURCE_LIMIT', message: expect.stringContaining(`quota of ${QUOTA} bytes (HISTORY_MAX_BYTES_PER_DB)`) });
    // The refused update changed nothing.
    const read = await call('DATA_QUERY_SQL', { sql: 'SELECT DISTINCT n FROM big' });
    expect(read).toMatchObject({ ok: true, result: { rows: [[accepted]] } });
  });
});
