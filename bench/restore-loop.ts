// A hostile admin's restore loop (session 33, T11): restores are an admin's writes, charged no
// rate (one at a time per database), so an admin may restore in place back to back. Workspace
// `loud` restores BENCH_DBS databases in place, each in a loop, for BENCH_SECONDS; workspace
// `quiet` reads by primary key one after another meanwhile, on the same shard. Said: restores
// done and their rate, the quiet read's p50/p99 alone and during, the data folder's growth.
// BENCH_CHARGED=1 charges each restore as the API and the web page do since session 34 (T12:
// `chargedRestore`, 50 calls before it runs, as member `loud/@admin`), a refused one retried
// after 100 ms. `npm run build && node --import tsx bench/restore-loop.ts`.
import { execSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { chargedRestore } from '../src/calls/activity-charge.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { HistoryClient } from '../src/shards/history-client.ts';
import { ShardOpClient } from '../src/shards/shard-op-client.ts';
import { benchSite } from './agentdb-worker.ts';
import { quantile, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const DBS = Number(process.env.BENCH_DBS ?? 4);
const CHARGED = process.env.BENCH_CHARGED === '1';
// BENCH_DRY=1: dry runs instead (what each costs the shard, against a restore).
const DRY = process.env.BENCH_DRY === '1';
const settings = { database: 'agent' as const };
const site = benchSite(REDIS_URL, 'restore-loop', { SHARD_COUNT: '1', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
await site.worker({});
const redis = new Redis(REDIS_URL);
const ops = new ShardOpClient({ redisUrl: REDIS_URL, prefix: site.config.prefix });
const history = new HistoryClient(ops, 1, new AgentRegistry(redis, keysFor(site.config.prefix)));
// The site's client counts no rate (a bench's); the charge is counted at the plans' rates (pro, per minute).
const charging = new AgentDbClient({ redisUrl: REDIS_URL, prefix: site.config.prefix, shardCount: 1, rateLimits: { windowS: 60 } });
const must = async (p: Promise<{ ok: boolean }>) => {
  const a = await p;
  if (!a.ok) throw new Error(JSON.stringify(a));
};
const write = (workspace: string, agent: string, sql: string) =>
  must(site.client.call({ workspace, agent, settings, tool: 'DATA_WRITE_SQL', arguments: { sql } }));
const du = () => Number(execSync(`du -sk ${site.config.dataDir}`).toString().split('\t')[0]) / 1024;
try {
  await write('quiet', 'q', 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)');
  await write('quiet', 'q', "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO kv SELECT i, 'v' FROM n");
  for (let d = 0; d < DBS; d++) {
    await write('loud', `a${d}`, 'CREATE TABLE t (x)');
    for (let i = 0; i < 20; i++) await write('loud', `a${d}`, `INSERT INTO t VALUES (randomblob(1000))`);
  }
  await new Promise((r) => setTimeout(r, 1100));
  const at = new Date(Date.now() - 500).toISOString();
  const readOnce = async (i: number) => {
    const t0 = performance.now();
    await must(
      site.client.call({
        workspace: 'quiet',
        agent: 'q',
        settings,
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] },
      }),
    );
    return performance.now() - t0;
  };
  const readsFor = async (ms: number) => {
    const out: number[] = [];
    const end = performance.now() + ms;
    for (let i = 0; performance.now() < end; i++) out.push(await readOnce(i));
    return out.sort((a, b) => a - b);
  };
  const stat = (l: number[]) => ({ n: l.length, p50: round(quantile(l, 0.5), 2), p99: round(quantile(l, 0.99), 2) });
  const alone = stat(await readsFor(3000));
  const before = du();
  let restores = 0;
  let refused = 0;
  const end = performance.now() + SECONDS * 1000;
  const loops = Array.from({ length: DBS }, async (_, d) => {
    while (performance.now() < end) {
      try {
        const restore = () => history.restore(`loud/a${d}`, { at, ...(DRY ? { dryRun: true } : {}), by: { who: 'loud/@admin', via: 'key' } }, 'operator');
        if (!CHARGED) await restore();
        else {
          const charge = (workspace: string, member: string, points?: number) => charging.chargeLookup({ workspace, agent: `@${member}` }, points);
          const out = await chargedRestore(charge, { workspace: 'loud', name: 'admin' }, DRY, restore);
          if ('limited' in out) {
            refused++;
            await new Promise((r) => setTimeout(r, 100));
            continue;
          }
        }
        restores++;
      } catch {
        refused++;
      }
    }
  });
  const during = stat(await readsFor(SECONDS * 1000));
  await Promise.all(loops);
  console.log(
    JSON.stringify({
      dbs: DBS,
      charged: CHARGED,
      dryRuns: DRY,
      seconds: SECONDS,
      restores,
      refused,
      perS: round(restores / SECONDS, 1),
      alone,
      during,
      dataDirMbBefore: round(before, 1),
      dataDirMbAfter: round(du(), 1),
    }),
  );
} finally {
  await charging.close();
  await ops.close();
  redis.disconnect();
  await site.close();
}
