import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import type { Envelope } from '../src/contracts/envelope.ts';
import { connectRedis } from '../src/redis/connection.ts';
import { keysFor } from '../src/redis/keys.ts';
import { infoField } from '../src/redis/memory-headroom.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import { drive, round } from './stats.ts';

const MB = 1024 * 1024;

/** One fill variant's figures. */
export interface FillVariant {
  calls: number;
  /** Answers by outcome: `ok`, `awaiting_approval` or an error code. */
  outcomes: Record<string, number>;
  usedMemoryGrowthMb: number;
  /** What the hostile workspace's budget ledger holds after it, MB. */
  heldMb: number;
  seconds: number;
}

/**
 * Issue 27's three ways one hostile workspace filled Redis — big query results, big describes,
 * parked writes with 1 MB params — then big results again until its budget refuses them, each
 * against a Redis of its own (so other Redis users do not blur `used_memory`), with a quiet
 * workspace's read after each. Before the fix: +631 MB, +105 MB and +86 MB for the same calls.
 */
export async function benchRedisFill(opts: { budgetBytes: number; bigQueries: number; describes: number; parked: number; untilRefused: number }) {
  const own = await OwnRedis.start();
  const admin = connectRedis(own.url);
  await admin.config('SET', 'maxmemory', String(2048 * MB));
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  // No fsync per write: this measures memory, not the disk.
  await admin.config('SET', 'appendfsync', 'no');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-fill-'));
  const config = loadConfig({
    REDIS_URL: own.url,
    AGENTDB_PREFIX: 'fill',
    AGENTDB_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    SHARD_COUNT: '4',
    REDIS_BYTES_PER_WORKSPACE: String(opts.budgetBytes),
  });
  const pool = new ShardWorkerPool({ config, shards: [0, 1, 2, 3], logger: pino({ level: 'silent' }) });
  await pool.start();
  const client = new AgentDbClient({
    redisUrl: own.url,
    prefix: config.prefix,
    shardCount: config.shardCount,
    resultTtlS: config.resultTtlS,
    approvalTtlMs: config.approvalTtlMs,
    redisBytesPerWorkspace: config.redisBytesPerWorkspace,
    redisMemoryHeadroomPercent: config.redisMemoryHeadroomPercent,
  });
  const keys = keysFor(config.prefix);
  const used = async () => infoField(await admin.info('memory'), 'used_memory');
  const held = async (workspace: string) => round(Number((await admin.get(keys.redisBudget(workspace).held)) ?? 0) / MB, 1);
  // One hostile workspace per variant, each with its own budget, so that each is measured whole.
  const hog = (variant: string) => ({ workspace: `hog-${variant}`, agent: 'filler', settings: { database: 'agent' as const } });
  const quiet = { workspace: 'quiet', agent: 'reader', settings: { database: 'agent' as const } };
  const quietReads: string[] = [];
  const variant = async (workspace: string, calls: number, one: (i: number) => Promise<Envelope | { ok: false; status: string }>): Promise<FillVariant> => {
    const before = await used();
    const outcomes: Record<string, number> = {};
    const { seconds } = await drive(calls, 8, async (i) => {
      const a = await one(i);
      const k = a.ok ? 'ok' : 'status' in a ? a.status : a.error.code;
      outcomes[k] = (outcomes[k] ?? 0) + 1;
    });
    const q = (await client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })) as Envelope;
    quietReads.push(q.ok ? 'ok' : q.error.code);
    return { calls, outcomes, usedMemoryGrowthMb: round(((await used()) - before) / MB, 1), heldMb: await held(workspace), seconds: round(seconds, 1) };
  };
  try {
    const must = (e: Envelope) => {
      if (!e.ok) throw new Error(`bench redis-fill set-up failed: ${e.error.code}: ${e.error.message}`);
    };
    must((await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } })) as Envelope);
    // 12 tables of 380 columns with 200-byte names: a description of about 1 MB, as in the issue.
    for (let t = 0; t < 12; t++) {
      const cols = Array.from({ length: 380 }, (_, c) => `c${String(c).padStart(3, '0')}_${'n'.repeat(195)}`).join(', ');
      must((await client.call({ ...hog('describes'), tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE wide${t} (${cols})` } })) as Envelope);
      must((await client.call({ ...hog('parked'), tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE wide${t} (${cols})` } })) as Envelope);
    }
    const start = await used();
    const bigSql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) SELECT i, printf('%.1000c','x') AS s FROM c";
    const bigQuery = () => client.call({ ...hog('queries'), tool: 'DATA_QUERY_SQL', arguments: { sql: bigSql, max_rows: 1000 } }) as Promise<Envelope>;
    const bigQueries = await variant('hog-queries', opts.bigQueries, bigQuery);
    const describes = await variant(
      'hog-describes',
      opts.describes,
      () => client.call({ ...hog('describes'), tool: 'DATA_DESCRIBE_SCHEMA', arguments: {} }) as Promise<Envelope>,
    );
    const param = 'p'.repeat(1_000_000);
    const gated = { ...hog('parked'), settings: { database: 'agent' as const, approval: 'write' as const } };
    const parked = await variant(
      'hog-parked',
      opts.parked,
      (i) =>
        client.call(
          { ...gated, tool: 'DATA_WRITE_SQL', arguments: { sql: `INSERT INTO wide${i % 12} (c000_${'n'.repeat(195)}) VALUES (?)`, params: [param] } },
          { wait: false },
        ) as Promise<Envelope>,
    );
    // The first workspace again, on and on: its budget holds.
    const untilRefused = await variant('hog-queries', opts.untilRefused, bigQuery);
    const info = await admin.info('memory');
    return {
      redis: { maxmemoryMb: 2048, policy: 'noeviction' },
      budgetMb: round(opts.budgetBytes / MB, 1),
      variants: { bigQueries, describes, parked, untilRefused },
      usedMemoryGrowthMb: round((infoField(info, 'used_memory') - start) / MB, 1),
      heldMb: round((await held('hog-queries')) + (await held('hog-describes')) + (await held('hog-parked')), 1),
      quietReads,
      leasesHeld: pool.ownedShards().length,
    };
  } finally {
    await client.close();
    await pool.stop();
    admin.disconnect();
    await own.remove();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The scenario's lines for the console. */
export function printRedisFill(r: Awaited<ReturnType<typeof benchRedisFill>>): void {
  for (const [name, v] of Object.entries(r.variants)) {
    console.log(
      `redis fill, ${name} (one workspace): ${v.calls} calls in ${v.seconds} s → ${JSON.stringify(v.outcomes)}; used_memory +${v.usedMemoryGrowthMb} MB; ledger ${v.heldMb} MB`,
    );
  }
  console.log(
    `redis fill in all: used_memory +${r.usedMemoryGrowthMb} MB for three hostile workspaces of a ${r.budgetMb} MB budget each (their ledgers ${r.heldMb} MB); quiet workspace's reads ${JSON.stringify(r.quietReads)}; leases held ${r.leasesHeld} of 4`,
  );
}
