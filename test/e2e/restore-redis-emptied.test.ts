import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { pastMs } from '../helpers/history.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';
import { runCli, spawnCli, startCli, stop } from '../helpers/processes.ts';

// Session 36, F15 (a fault not tried before): Redis SIGKILLed and started again empty while a
// restore in place runs (its rebuilt file being written beside the database). Whatever the
// restore answers must be true of the database: ok, restored whole; "may have run", restored
// whole or untouched; any other refusal, untouched; never half.
let redis: OwnRedis;
let sb: Sandbox;
const running: ChildProcess[] = [];
beforeAll(async () => {
  redis = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: redis.url, LOCK_DURATION_MS: '1500', STALLED_INTERVAL_MS: '500', LEASE_TTL_MS: '1000' });
});
afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb?.cleanup();
  await redis?.remove();
});

describe('a restore in place while Redis is SIGKILLed and started again empty', () => {
  it('answers what it did: restored whole, or the database as it was, never half', async () => {
    running.push(await startCli(['worker'], sb.env));
    const client = sb.client();
    const who = { workspace: 'acme', agent: 'big', settings: { database: 'agent' as const } };
    const write = async (sql: string) => expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject({ ok: true });
    await write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)');
    for (let i = 0; i < 20; i++)
      await write(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) INSERT INTO t (pad) SELECT printf('%02000d', x) FROM c`);
    const moment = Date.now();
    pastMs(moment);
    await write(`UPDATE t SET pad = 'changed ' || pad`);
    const file = databasePath(sb.config.dataDir, 'acme', 'big', shardOf('acme/big', sb.config.shardCount));
    const state = () => {
      const db = new Database(file, { readonly: true });
      try {
        return {
          changed: (db.prepare("SELECT count(*) AS n FROM t WHERE pad LIKE 'changed%'").get() as { n: number }).n,
          rows: (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n,
          ok: db.pragma('integrity_check', { simple: true }),
        };
      } finally {
        db.close();
      }
    };
    const restore = spawnCli(['restore', 'acme/big', '--at', new Date(moment).toISOString(), '--json'], sb.env);
    // As soon as the rebuilt file is being written beside the database: Redis goes, empty.
    const deadline = Date.now() + 60_000;
    const building = () => fs.readdirSync(path.dirname(file)).some((n) => n.includes('.restore-'));
    while (!building() && Date.now() < deadline && restore.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    const caught = building();
    await redis.kill();
    redis.wipe();
    await redis.start();
    const end = await restore.exited;
    const after = state();
    // Seen: UNAVAILABLE "its job is gone from Redis …; it may have run part or all of the way", restored whole.
    expect(caught, 'Redis went while the restore was under way').toBe(true);
    expect(after.ok).toBe('ok');
    expect(after.rows).toBe(20_000);
    if (end.code === 0) expect(after.changed).toBe(0);
    else if (!/may (still run|have run)|may have run it already/.test(end.stdout + end.stderr)) expect(after.changed).toBe(20_000);
    else expect([0, 20_000]).toContain(after.changed);
    // Asked again, it restores whole.
    const again = await runCli(['restore', 'acme/big', '--at', new Date(moment).toISOString(), '--json'], sb.env);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(state()).toEqual({ changed: 0, rows: 20_000, ok: 'ok' });
  }, 300_000);
});
