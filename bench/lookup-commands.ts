// `node --import tsx bench/lookup-commands.ts`: Redis commands one `GET /v1/calls/:id` costs, for
// a finished call under a generated id, under the caller's own id, an unfinished (parked) call,
// and an unknown id; counted by Redis itself (INFO commandstats: those a script runs included) on
// a Redis of its own. Workers' own polling shows as fractions.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import type { Sandbox } from '../test/helpers/harness.ts';
import { AgentDbClient } from '../src/calls/client.ts';

const LOOKUPS = 200;
/** `RATE_LIMITS=plan` counts each lookup against the rate limits too (two more commands); default off, the lookup alone. */
const RATE_LIMITS = process.env.RATE_LIMITS === 'plan' ? 'plan' : 'off';

/** Every command Redis has run so far, by name. */
async function commandStats(admin: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

async function main(): Promise<void> {
  const own = await OwnRedis.start();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-lookup-'));
  const env = { REDIS_URL: own.url, AGENTDB_DATA_DIR: dataDir, AGENTDB_PREFIX: 'lk', LOG_LEVEL: 'silent', SHARD_COUNT: '16', RATE_LIMITS };
  const config = loadConfig(env);
  const clients: AgentDbClient[] = [];
  const sb = {
    config,
    dataDir,
    env,
    client: (opts = {}) => {
      const c = new AgentDbClient({ redisUrl: own.url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: config.rateLimits, ...opts });
      clients.push(c);
      return c;
    },
  } as unknown as Sandbox;
  // keyed-app's Redis is the harness's REDIS_URL, read when it is first imported.
  process.env.REDIS_URL = own.url;
  const { keyedApp } = await import('../test/helpers/keyed-app.ts');
  const pool = new ShardWorkerPool({ config, shards: Array.from({ length: 16 }, (_, i) => i), logger: pino({ level: 'silent' }) });
  await pool.start();
  const k = keyedApp(sb);
  const admin = new Redis(own.url);
  try {
    const key = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent', approval: 'write' } });
    const auth = { authorization: `Bearer ${key}` };
    const post = async (body: object) => (await k.app.inject({ method: 'POST', url: '/v1/calls', headers: auth, payload: body })).json();
    await post({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } }).then(async (a) => {
      const d = await k.client.decide(a.approval.id, { decision: 'approve', by: 'ops', operator: true });
      return d;
    });
    const generated = (await post({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } })).callId as string;
    await post({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, callId: 'own-1' });
    const parked = (await post({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } })).callId as string;
    const cases: Record<string, string> = {
      'finished, generated id': generated,
      'finished, own id': 'own-1',
      'parked (awaiting approval)': parked,
      'unknown id': 'nope-1',
    };
    for (const [name, id] of Object.entries(cases)) {
      await k.app.inject({ method: 'GET', url: `/v1/calls/${id}`, headers: auth });
      const before = await commandStats(admin);
      for (let i = 0; i < LOOKUPS; i++) await k.app.inject({ method: 'GET', url: `/v1/calls/${id}`, headers: auth });
      const after = await commandStats(admin);
      const by: string[] = [];
      let total = 0;
      for (const [cmd, n] of after) {
        // The INFO of the count before is not the lookups'.
        const d = n - (before.get(cmd) ?? 0) - (cmd === 'info' ? 1 : 0);
        if (d > 0) {
          total += d;
          by.push(`${cmd} ${(d / LOOKUPS).toFixed(2)}`);
        }
      }
      console.log(`${name}: ${(total / LOOKUPS).toFixed(2)} commands per lookup (${by.join(', ')})`);
    }
  } finally {
    admin.disconnect();
    await k.close();
    await Promise.all(clients.map((c) => c.close()));
    await pool.stop();
    await own.remove();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
