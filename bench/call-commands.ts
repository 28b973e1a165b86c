// `node --import tsx bench/call-commands.ts`: the Redis commands one primary-key read (sequential, or IN_FLIGHT at once)
// through the client library costs (caller, worker and scripts together), by name, counted by
// Redis itself (INFO commandstats) on a Redis of its own; the figures issue 31 asks for.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';

const CALLS = Number(process.env.CALLS ?? 500);
/** Calls in flight at once (IN_FLIGHT; default 1, sequential): what batching saves shows only with several. */
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 1);

async function commandStats(admin: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

const own = await OwnRedis.start();
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-cmds-'));
const config = loadConfig({
  REDIS_URL: own.url,
  AGENTDB_DATA_DIR: dataDir,
  AGENTDB_PREFIX: 'cc',
  LOG_LEVEL: 'silent',
  SHARD_COUNT: '4',
  RATE_LIMITS: process.env.RATE_LIMITS ?? 'off',
});
const pool = new ShardWorkerPool({ config, shards: [0, 1, 2, 3], logger: pino({ level: 'silent' }) });
await pool.start();
const client = new AgentDbClient({ redisUrl: own.url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: config.rateLimits });
const admin = new Redis(own.url);
try {
  const who = { workspace: 'bench', agent: 'reader', settings: { database: 'agent' as const } };
  await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } });
  await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO kv VALUES (1, 'one')" } });
  for (let i = 0; i < 50; i++) await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [1] } });
  const before = await commandStats(admin);
  const t0 = Date.now();
  let next = 0;
  const lane = async () => {
    while (next++ < CALLS) await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [1] } });
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  const ms = Date.now() - t0;
  const after = await commandStats(admin);
  const per = [...after].map(([n, c]) => [n, (c - (before.get(n) ?? 0)) / CALLS] as const).filter(([n, c]) => c > 0.01 && n !== 'info');
  per.sort((a, b) => b[1] - a[1]);
  const total = per.reduce((s, [, c]) => s + c, 0);
  console.log(
    JSON.stringify({
      calls: CALLS,
      inFlight: IN_FLIGHT,
      msPerCall: ms / CALLS,
      commandsPerCall: Math.round(total * 100) / 100,
      byName: Object.fromEntries(per.map(([n, c]) => [n, Math.round(c * 100) / 100])),
    }),
  );
} finally {
  admin.disconnect();
  await client.close();
  await pool.stop();
  await own.remove();
  rmSync(dataDir, { recursive: true, force: true });
}
