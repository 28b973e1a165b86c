// `node --import tsx bench/call-commands.ts`: the Redis commands one primary-key read (sequential, or IN_FLIGHT at once)
// through the client library costs (caller, worker and scripts together), by name, counted by
// Redis itself (INFO commandstats) on a Redis of its own; the figures issue 31 asks for.
// RAW=1 counts raw BullMQ's call instead (`bench/raw-bullmq.ts`: a no-op worker, a caller
// awaiting waitUntilFinished), the baseline of `bench/query-only.ts`. Beside the counts: the
// CPU Redis spent per call (INFO cpu), the microseconds by command (commandstats; a script's
// EVALSHA includes its inner commands, also counted under their own names) and, with MONITOR=1 (slower; counts only), the commands each connection sent
// itself per call — its round trips, where it awaited each answer. KIND=insert counts the small insert of
// `bench/small-insert.ts` (one new row per call, history on) instead of the read.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import { rawBullmq } from './raw-bullmq.ts';

const CALLS = Number(process.env.CALLS ?? 500);
/** Calls in flight at once (IN_FLIGHT; default 1, sequential): what batching saves shows only with several. */
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 1);
const RAW = process.env.RAW === '1';
const MONITOR = process.env.MONITOR === '1';
const INSERT = process.env.KIND === 'insert';
const MEMBER = process.env.MEMBER === '1';
const OWN_ID = process.env.OWN_ID === '1';

interface Stat {
  calls: number;
  usec: number;
}

async function commandStats(admin: Redis): Promise<Map<string, Stat>> {
  const out = new Map<string, Stat>();
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  return out;
}

/** Redis's CPU so far, user and system, in µs. */
async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const f = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (f('used_cpu_sys') + f('used_cpu_user')) * 1e6;
}

/** Redis's socket work so far (INFO stats): reads and writes it handled, bytes in and out. */
async function netStats(admin: Redis): Promise<Record<string, number>> {
  const info = await admin.info('stats');
  const f = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return {
    reads: f('total_reads_processed'),
    writes: f('total_writes_processed'),
    bytesIn: f('total_net_input_bytes'),
    bytesOut: f('total_net_output_bytes'),
  };
}

/**
 * Top-level commands (not those a script runs) by connection, named by CLIENT SETNAME where set:
 * read from `redis-cli monitor` (ioredis's own monitor mode lost track of replies here).
 */
async function watchConnections(port: number, admin: Redis) {
  const cli = spawn('redis-cli', ['-p', String(port), 'monitor'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const byAddr = new Map<string, Map<string, number>>();
  createInterface({ input: cli.stdout }).on('line', (line) => {
    const m = /^\S+ \[\d+ ([^\]]+)\] "([^"]+)"/.exec(line);
    if (!m || m[1] === 'lua') return;
    let cmds = byAddr.get(m[1]!);
    if (!cmds) byAddr.set(m[1]!, (cmds = new Map()));
    const name = m[2]!.toLowerCase();
    cmds.set(name, (cmds.get(name) ?? 0) + 1);
  });
  await new Promise((r) => cli.stdout.once('data', r));
  return async () => {
    const names = new Map<string, string>();
    for (const line of String(await admin.client('LIST')).split('\n')) {
      const addr = / addr=(\S+)/.exec(line)?.[1];
      if (addr) names.set(addr, / name=(\S*)/.exec(line)?.[1] ?? '');
    }
    cli.kill();
    const out: Record<string, Record<string, number>> = {};
    for (const [addr, cmds] of byAddr) {
      const per = [...cmds]
        .map(([n, c]) => [n, Math.round((c / CALLS) * 100) / 100] as const)
        .filter(([n, c]) => c >= 0.01 && !['info', 'client', 'ping'].includes(n));
      if (per.length) out[`${names.get(addr) || 'unnamed'} ${addr}`] = Object.fromEntries(per);
    }
    return out;
  };
}

const own = await OwnRedis.start();
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-cmds-'));
const admin = new Redis(own.url);
// As the shared Redis of `bench/query-only.ts` runs: no fsync on every write in Redis's CPU.
await admin.config('SET', 'appendonly', 'no');
let close: () => Promise<void>;
let call: () => Promise<unknown>;
if (RAW) {
  const raw = await rawBullmq(own.url, 'cc-raw', 32, false);
  let i = 0;
  call = () => raw.call(i++);
  close = () => raw.close();
} else {
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
  // MEMBER=1: a person's client calls (`@reader`, the shared database), bound to its member
  // record's creation with SINCE=<ms> (as an HTTP server since session 27 sends it).
  const since = process.env.SINCE ? { since: Number(process.env.SINCE) } : {};
  // KEY=1: an agent key's call (`keyId`), bound to its agent's registration with AGENT_SINCE=<ms>
  // (as an HTTP server since session 28 sends it); the key's own checks are the server's, not here.
  const keyed = process.env.KEY === '1' ? { keyId: 'bench-key', ...(process.env.AGENT_SINCE ? { agentSince: Number(process.env.AGENT_SINCE) } : {}) } : {};
  const who = MEMBER
    ? { workspace: 'bench', agent: '@reader', member: { name: 'reader', role: 'member' as const, ...since } }
    : { workspace: 'bench', agent: 'reader', settings: { database: 'agent' as const }, ...keyed };
  await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } });
  await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO kv VALUES (1, 'one')" } });
  let n = 0;
  // OWN_ID=1: each call under a call id of the caller's own (claimed, and taken in the ledger).
  const id = () => (OWN_ID ? { callId: `c-${n}` } : {});
  call = INSERT
    ? () => client.call({ ...who, ...id(), tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO kv (v) VALUES (?)', params: [`row ${n++}`] } })
    : () => client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [1] } });
  close = async () => {
    await client.close();
    await pool.stop();
  };
}
try {
  for (let i = 0; i < 50; i++) await call();
  const connections = MONITOR ? await watchConnections(own.port, admin) : undefined;
  const before = await commandStats(admin);
  const cpu0 = await redisCpu(admin);
  const net0 = await netStats(admin);
  const t0 = Date.now();
  let next = 0;
  const lane = async () => {
    while (next++ < CALLS) await call();
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  const ms = Date.now() - t0;
  const after = await commandStats(admin);
  const net1 = await netStats(admin);
  const per = [...after]
    .map(([n, s]) => [n, (s.calls - (before.get(n)?.calls ?? 0)) / CALLS, (s.usec - (before.get(n)?.usec ?? 0)) / CALLS] as const)
    .filter(([n, c]) => c > 0.01 && n !== 'info' && n !== 'client' && n !== 'monitor');
  per.sort((a, b) => b[1] - a[1]);
  const total = per.reduce((s, [, c]) => s + c, 0);
  const r = (x: number) => Math.round(x * 100) / 100;
  console.log(
    JSON.stringify({
      mode: RAW ? 'raw BullMQ' : INSERT ? 'agentdb insert' : 'agentdb',
      calls: CALLS,
      inFlight: IN_FLIGHT,
      msPerCall: ms / CALLS,
      commandsPerCall: r(total),
      // Redis's own CPU (INFO cpu: its process, socket reads and writes included) per call.
      redisCpuUsPerCall: Math.round(((await redisCpu(admin)) - cpu0) / CALLS),
      // Its socket reads and writes (each a system call, and a wake-up) and bytes, per call.
      netPerCall: Object.fromEntries(Object.entries(net1).map(([k, v]) => [k, r((v - net0[k]!) / CALLS)])),
      byName: Object.fromEntries(per.map(([n, c]) => [n, r(c)])),
      usecByName: Object.fromEntries(per.map(([n, , u]) => [n, r(u)])),
      ...(connections ? { topLevelByConnection: await connections() } : {}),
    }),
  );
} finally {
  admin.disconnect();
  await close();
  await own.remove();
  rmSync(dataDir, { recursive: true, force: true });
}
