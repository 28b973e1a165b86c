import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { historyDir } from '../../src/history/history-files.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { type Sandbox, sandbox } from '../helpers/harness.ts';
import { mountTmpfs, growTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// A retryable answer (STORAGE_FULL here) tells the caller to send the call again, and a careful
// caller sends it again under the same call id. That re-send used to answer the stored refusal
// until the result expired: the write never went through, whatever room came back. Now a call
// whose answer was a retryable refusal runs again under its id; one answered ok still replays.
// History is on a full 1 MB tmpfs and may run 256 KiB behind its WAL (HISTORY_MAX_BEHIND_BYTES).

const box: Sandbox = sandbox({ HISTORY_MAX_BEHIND_BYTES: String(256 * 1024), HISTORY_CHECKPOINT_BYTES: String(64 * 1024) });
const mnt = historyDir(box.dataDir, 'acme/scout');
fs.mkdirSync(mnt, { recursive: true });
const refused = mountTmpfs(mnt, '1m');
if (refused) console.warn(`retry-under-id.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);

const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };

describe.runIf(!refused)('a call sent again under its id after a retryable answer', () => {
  let pool: ShardWorkerPool;
  let client: AgentDbClient;

  beforeAll(async () => {
    pool = await box.pool();
    client = box.client();
    const made = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (k INTEGER NOT NULL, v TEXT NOT NULL)' } });
    expect(made.ok, JSON.stringify(made)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await pool?.stop();
    if (!refused) {
      unmountTmpfs(mnt);
    }
    await box.cleanup();
  });

  const insert = (k: number) =>
    client.call({ ...who, callId: `w${k}`, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (k, v) VALUES (?, ?)', params: [k, 'x'.repeat(3000)] } });
  const count = async (k: number) => {
    const out = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t WHERE k = ?', params: [k] } });
    expect(out.ok, JSON.stringify(out)).toBe(true);
    return (out as unknown as { result: { rows: unknown[][] } }).result.rows[0]![0];
  };

  it('runs again once room is back, and the call answered ok before still replays', { timeout: 120_000 }, async () => {
    let full: number | undefined;
    for (let k = 0; k < 2000 && full === undefined; k++) {
      const out = await insert(k);
      if (!out.ok) {
        expect(out).toMatchObject({ error: { code: 'STORAGE_FULL' } });
        full = k;
      }
    }
    expect(full, 'no write was refused: the bound was never reached').toBeDefined();
    // While full, the same call under its id is refused again (it ran again, and met the fault).
    expect(await insert(full!)).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
    expect(await count(full!)).toBe(0);

    growTmpfs(mnt, '64m');
    const again = await insert(full!);
    expect(again, JSON.stringify(again)).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await count(full!)).toBe(1);
    // The id now answers that write, and an earlier acknowledged call replays without running.
    expect(await insert(full!)).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await insert(0)).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await count(full!)).toBe(1);
    expect(await count(0)).toBe(1);
  });
});
