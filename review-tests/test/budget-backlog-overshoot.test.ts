import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';

// H2 (high; fixed on f-H in 4cb65b2). The Redis budget counted only a queued call's arguments
// (~3 KB) at enqueue and its envelope (2 × up to 64 KiB) at completion, so calls queued behind
// a runaway statement all pass the check and then each leave an envelope. Measured against
// `agentdb start` (REDIS_BYTES_PER_WORKSPACE=4 MiB, STATEMENT_TIMEOUT_MS=3000): 3 runaway reads
// then 298 reads of a 60 KB row sent at once (client gone after 1.5 s; the calls go on): 298
// admitted (held 0.97 MB when sent), held 39.2 MB once they ran (9.4× the budget), used_memory
// +40 MB. At the pro defaults (128 MiB, 1,200 calls/min) ~41,000 calls fit by their arguments:
// ~5 GB counted, ~2.7 GB of jobs, far past a 1 GB maxmemory (then every workspace answers
// UNAVAILABLE). Here: a prefix no worker serves keeps every call queued, as behind a runaway.
const BUDGET = 256 * 1024;
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `review-h2-${randomUUID()}`;
const redis = new Redis(url);
afterAll(async () => {
  const doomed = await redis.keys(`${prefix}:*`);
  if (doomed.length > 0) await redis.del(...doomed);
  redis.disconnect();
});

it('calls queued at once cannot together promise envelopes past the workspace budget', async () => {
  const client = new AgentDbClient({ redisUrl: url, prefix, redisBytesPerWorkspace: BUDGET, rateLimits: false });
  try {
    const sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<60) SELECT printf('%.1000c','x') FROM c";
    const answers = await Promise.all(
      Array.from({ length: 50 }, () =>
        client.call({ workspace: 'evil', agent: 'a1', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql } }, { wait: false, timeoutMs: 50 }),
      ),
    );
    const queued = answers.filter((a) => 'status' in a && a.status === 'queued').length;
    // Each will leave up to 2 × 64 KiB once run: more than 2 queued passes 256 KiB.
    expect(queued * 2 * 64 * 1024).toBeLessThanOrEqual(BUDGET + 2 * 64 * 1024);
  } finally {
    await client.close();
  }
});
