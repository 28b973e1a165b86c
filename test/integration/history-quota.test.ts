import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

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
  it('refuses further writes with HISTORY_QUOTA naming the quota, writing nothing and charging nothing; reads still work', async () => {
    expect((await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB, n INTEGER)' })).ok).toBe(true);
    expect(
      (
        await call('DATA_WRITE_SQL', {
          sql: 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<8) INSERT INTO big SELECT i, randomblob(10000), 0 FROM c',
        })
      ).ok,
    ).toBe(true);
    type Refusal = { ok: boolean; error?: { code: string; message?: string } };
    let refused: Refusal | undefined;
    let accepted = 0;
    for (let round = 1; round <= 40 && !refused; round++) {
      const env = await call('DATA_WRITE_SQL', { sql: 'UPDATE big SET b = randomblob(10000), n = ?', params: [round] });
      if (env.ok) accepted = round;
      else refused = env as unknown as Refusal;
    }
    expect(refused, 'the quota never refused a write').toBeDefined();
    expect(refused!.error, JSON.stringify(refused)).toMatchObject({
      code: 'HISTORY_QUOTA',
      message: expect.stringContaining(`quota of ${QUOTA} bytes (HISTORY_MAX_BYTES_PER_DB)`),
    });
    // The refused update changed nothing, and costs nothing: a DELETE is refused too, uncharged.
    expect(await call('DATA_WRITE_SQL', { sql: 'DELETE FROM big WHERE id = 1' })).toMatchObject({ ok: false, error: { code: 'HISTORY_QUOTA' } });
    const read = await call('DATA_QUERY_SQL', { sql: 'SELECT DISTINCT n FROM big' });
    expect(read).toMatchObject({ ok: true, result: { rows: [[accepted]] } });
    const redis = connectRedis(sb.config.redisUrl);
    try {
      const usage = (await readUsage(redis, keysFor(sb.config.prefix), 'acme')).filter((r) => r.tool === 'DATA_WRITE_SQL');
      // The create, the fill and the accepted updates; neither refusal.
      expect(usage.map((r) => r.calls)).toEqual([2 + accepted]);
    } finally {
      redis.disconnect();
    }
  });
});

describe('the history quota and a write already committed', () => {
  it('a write run again under its call key after the quota was passed answers what it did (replayed), not HISTORY_QUOTA', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-quota-replay-'));
    const pool = await oneChildPool(dataDir, { maxBytesPerDb: QUOTA });
    try {
      const db = historyTarget(dataDir, 'acme/replay');
      const write = (sql: string, callKey: string) => pool.run({ op: 'write', db, sql, params: [], callKey });
      expect(await write('CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)', 'create')).toMatchObject({ ok: true });
      let last = '';
      for (let round = 1; round <= 60; round++) {
        const sql = `INSERT OR REPLACE INTO big VALUES (1, randomblob(20000 + ${round}))`;
        const out = await write(sql, `r${round}`);
        if (!out.ok) {
          expect(out.error.code).toBe('HISTORY_QUOTA');
          break;
        }
        last = sql;
        if (round === 60) throw new Error('the quota never refused a write');
      }
      // The last accepted write again under its key (its job retried after a crash): it was
      // committed, so it answers what it did.
      const round = last.match(/\+ (\d+)\)/)![1]!;
      expect(await write(last, `r${round}`)).toMatchObject({ ok: true, replayed: true });
    } finally {
      await pool.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
