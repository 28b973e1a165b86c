import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox } from '../helpers/harness.ts';
import { runCli, spawnCli, startCli, stop } from '../helpers/processes.ts';

// Session 36, F15 (a fault not tried before; passes on main too): the worker running a backup's
// upload SIGKILLed mid-upload (1 of its 16 files in the blob store), then the backup run again: a
// backup that answers ok must restore whole from the blob store alone.
const sb = sandbox({ LOCK_DURATION_MS: '1500', STALLED_INTERVAL_MS: '500', LEASE_TTL_MS: '1000' });
const running: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
});

const blobDir = () => path.join(sb.config.dataDir, 'blobs');
function files(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

describe('a backup whose worker is SIGKILLed mid-upload, run again', () => {
  it('answers ok the second time, and restores from the blob store whole', async () => {
    running.push(await startCli(['worker'], sb.env));
    const client = sb.client();
    const who = { workspace: 'acme', agent: 'big', settings: { database: 'agent' as const } };
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)' } })).toMatchObject({
      ok: true,
    });
    for (let i = 0; i < 20; i++)
      expect(
        await client.call({
          ...who,
          tool: 'DATA_WRITE_SQL',
          arguments: {
            sql: `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) INSERT INTO t (pad) SELECT printf('%02000d', x + ${i * 1000}) FROM c`,
          },
        }),
      ).toMatchObject({ ok: true });
    const before = files(blobDir()).length;
    const first = spawnCli(['backup', 'now', '--db', 'acme/big'], sb.env);
    // As soon as the upload has begun (a new file in the blob store), its worker goes.
    const deadline = Date.now() + 60_000;
    while (files(blobDir()).length === before && Date.now() < deadline && first.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    await stop(running.at(-1)!, 'SIGKILL');
    const killedAt = files(blobDir()).length;
    running.push(await startCli(['worker'], sb.env));
    const firstEnd = await first.exited;
    // Killed with part of the upload done: its op's job stalls, and the next worker runs it whole.
    expect(killedAt - before).toBeLessThan(16);
    expect(firstEnd.code, firstEnd.stderr).toBe(0);
    expect(firstEnd.stderr).toMatch(/acme\/big: \d+ files, [\d.]+ MB uploaded and verified/);
    const again = await runCli(['backup', 'now', '--db', 'acme/big'], sb.env);
    expect(again.code, again.stderr).toBe(0);
    const copy = await runCli(['restore', 'acme/big', '--from-blob', '--into', 'acme/bigcopy', '--json'], sb.env);
    expect(copy.code, copy.stdout + copy.stderr).toBe(0);
    const read = (agent: string) => {
      const file = databasePath(sb.config.dataDir, 'acme', agent, shardOf(`acme/${agent}`, sb.config.shardCount));
      const db = new Database(file, { readonly: true });
      try {
        return db.prepare('SELECT count(*) AS n, sum(length(pad)) AS bytes, max(k) AS k FROM t').get();
      } finally {
        db.close();
      }
    };
    expect(read('bigcopy')).toEqual(read('big'));
    expect(read('big')).toEqual({ n: 20_000, bytes: 40_000_000, k: 20_000 });
  }, 300_000);
});
