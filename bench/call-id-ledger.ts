// What the call-id ledger (src/calls/call-id-ledger.ts) costs (`npm run build && node --import tsx
// bench/call-id-ledger.ts`): a take alone (a new id, the same call again, another call under a
// used id), then sequential DATA_WRITE_SQL calls with their own call ids through the client and a
// shard worker in this process, in interleaved rounds (ABBA) with the ledger's take on and replaced
// by a no-op. BENCH_ROUNDS (default 4), BENCH_SEQ_CALLS (default 1000).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { AgentDbClient } from '../src/calls/client.ts';
import { CallIdLedger } from '../src/calls/call-id-ledger.ts';
import { loadConfig } from '../src/config.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { drive, round, summarise } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const SEQ = Number(process.env.BENCH_SEQ_CALLS ?? 1000);

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-ledger-'));

function perTake(n: number, take: (i: number) => unknown): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) take(i);
  return round(Number(process.hrtime.bigint() - t0) / 1000 / n, 2);
}

const ledger = new CallIdLedger({ dataDir, retentionMs: 9 * 24 * 3600 * 1000 });
const now = Date.now();
const a = { shard: 0, database: 'bench/a', fingerprint: 'f'.repeat(64) };
const b = { ...a, fingerprint: 'e'.repeat(64) };
perTake(2000, (i) => ledger.take('warm', `warm.a.${i}`, a, now));
const take = {
  newIdUs: perTake(20_000, (i) => ledger.take('bench', `bench.a.${i}`, a, now)),
  sameCallUs: perTake(20_000, (i) => ledger.take('bench', `bench.a.${i}`, a, now)),
  otherCallUs: perTake(20_000, (i) => ledger.take('bench', `bench.a.${i}`, b, now)),
};
ledger.close();

const env = { REDIS_URL, AGENTDB_PREFIX: `bench-ledger-${randomUUID().slice(0, 8)}`, AGENTDB_DATA_DIR: dataDir, SHARD_COUNT: '2', LOG_LEVEL: 'silent' };
const config = loadConfig(env);
const pool = new ShardWorkerPool({
  config,
  shards: [0, 1],
  logger: pino({ level: 'silent' }),
  executorChild: { file: fileURLToPath(new URL('../dist/src/executor/executor-child.js', import.meta.url)), execArgv: [] },
});
await pool.start();
const client = new AgentDbClient({ redisUrl: REDIS_URL, prefix: config.prefix, shardCount: config.shardCount });
const realTake = CallIdLedger.prototype.take;
const rounds: { ledger: boolean; meanMs: number; p50Ms: number; p99Ms: number; takeMeanMs?: number; takeMaxMs?: number }[] = [];
/** How long each take ran inside the worker, in ms, in the round going on. */
let inTake: number[] = [];
try {
  const who = { workspace: 'bench', agent: 'writer', settings: { database: 'agent' as const } };
  const must = async (p: Promise<{ ok: boolean }>) => {
    const env = await p;
    if (!env.ok) throw new Error(`bench call failed: ${JSON.stringify(env)}`);
  };
  await must(client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } }));
  let n = 0;
  const write = () =>
    must(client.call({ ...who, callId: `c-${n++}`, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO kv (v) VALUES (?)', params: ['v'] } }));
  await drive(500, 1, write);
  // ABBA: on, off, off, on, …, so a drift over the run (the machine's load) weighs on both alike.
  for (let r = 0; r < ROUNDS * 2; r++) {
    const on = [true, false, false, true][r % 4]!;
    CallIdLedger.prototype.take = on
      ? function (this: CallIdLedger, ...args: Parameters<CallIdLedger['take']>) {
          const t0 = process.hrtime.bigint();
          try {
            return realTake.apply(this, args);
          } finally {
            inTake.push(Number(process.hrtime.bigint() - t0) / 1e6);
          }
        }
      : () => undefined;
    inTake = [];
    const { latencies, seconds } = await drive(SEQ, 1, write);
    const s = summarise(latencies, seconds);
    rounds.push({
      ledger: on,
      meanMs: round(latencies.reduce((x, y) => x + y, 0) / latencies.length),
      p50Ms: s.p50Ms,
      p99Ms: s.p99Ms,
      ...(on ? { takeMeanMs: round(inTake.reduce((x, y) => x + y, 0) / inTake.length), takeMaxMs: round(Math.max(...inTake)) } : {}),
    });
  }
} finally {
  CallIdLedger.prototype.take = realTake;
  await client.close();
  await pool.stop();
  await deleteKeys(config.prefix);
  rmSync(dataDir, { recursive: true, force: true });
}
const mean = (on: boolean) => round(rounds.filter((r) => r.ledger === on).reduce((x, r) => x + r.meanMs, 0) / ROUNDS);
console.log(JSON.stringify({ take, rounds, meanMsWithLedger: mean(true), meanMsWithout: mean(false) }, null, 1));
