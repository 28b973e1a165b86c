// `npm run build && node --import tsx bench/redis-ledger.ts`: what Redis does for one PK read at
// IN_FLIGHT at once (default 64) through the client library, against raw BullMQ's call (the two
// sides of `bench/query-only.ts`: this checkout's client and an `agentdb worker` process, or
// WORKER_BIN's; raw BullMQ's caller and its no-op worker process), on a redis-server of its own.
// 1. The ledger (MONITOR, counts only): per call, each top-level command by who sent it (caller or
//    worker) and, for a script, by script, with the commands it ran inside.
// 2. Time in Redis (SLOWLOG at 0 µs): per call, each top-level command's or script's execution time.
// 3. The cost (no MONITOR; ROUNDS rounds of CALLS, the two sides alternating): commands (INFO
//    commandstats, a script's inner commands each counted), bytes Redis read and wrote (INFO
//    stats), and redis-server's own CPU (utime + stime, /proc/<pid>/stat), all per call.
// RATE_LIMITS=plan counts the call's two rate counters too (the bench's client runs without).
// The floor (raw BullMQ whose worker asks a forked child, bench/raw-child-worker.ts) is a third side.
// KIND=insert: ours is bench/small-insert.ts's insert (one new row, history on) instead of the read.
// SIDE=agentdb, SIDE=raw or SIDE=floor measures that side alone (to profile redis-server under one of them).
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { ADMITTED_ADDS_LUA } from '../src/calls/admitted-add-batch.ts';
import { budgetNoteLua, FINISH_WITH_LUA, LUA_SCRIPTS_DIR, luaSource, NOTED_COMPLETE_LUA } from '../src/redis/lua-scripts.ts';
import { TAKE_JOB_LUA } from '../src/shards/shard-worker.ts';
import { freePort } from '../test/helpers/own-redis.ts';
import { benchSite } from './agentdb-worker.ts';
import { cpuSeconds } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { smallInsert } from './small-insert.ts';
import { drive, round } from './stats.ts';

const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 64);
const CALLS = Number(process.env.CALLS ?? 5000);
const LEDGER_CALLS = Number(process.env.LEDGER_CALLS ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 4);

/** Each script's SHA1 (as EVALSHA names it) to a name: agentdb's files and wrappers, BullMQ's own. */
function scriptNames(): Map<string, string> {
  const names = new Map<string, string>();
  const sha = (lua: string) => createHash('sha1').update(lua).digest('hex');
  for (const file of readdirSync(LUA_SCRIPTS_DIR)) if (file.endsWith('.lua')) names.set(sha(luaSource(file)), file);
  names.set(sha(ADMITTED_ADDS_LUA()), 'ADMITTED_ADDS_LUA');
  names.set(sha(NOTED_COMPLETE_LUA()), 'NOTED_COMPLETE_LUA');
  names.set(sha(FINISH_WITH_LUA()), 'FINISH_WITH_LUA (completion + bullmq moveToFinished)');
  names.set(sha(budgetNoteLua()), 'budget-note.lua (alone)');
  names.set(sha(TAKE_JOB_LUA()), 'TAKE_JOB_LUA (bullmq moveToActive)');
  const require = createRequire(import.meta.url);
  const dir = path.dirname(require.resolve('bullmq/dist/cjs/scripts/index.js'));
  for (const file of readdirSync(dir)) {
    if (!/-\d+\.js$/.test(file)) continue;
    for (const s of Object.values(require(path.join(dir, file)) as Record<string, { name?: string; content?: string }>))
      if (s?.content && s.name) names.set(sha(s.content), `bullmq ${s.name}`);
  }
  return names;
}

/** The local ports of the TCP sockets `pid` holds (to tell the worker's connections from the caller's). */
function portsOf(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 9 && inodes.has(f[9]!)) ports.add(parseInt(f[1]!.split(':')[1]!, 16));
  }
  return ports;
}

/** A top-level command's line: who sent it, what (a script by name), and the commands it ran inside. */
interface Sent {
  who: string;
  what: string;
  inner: string[];
}

/** MONITOR of `port` until the returned stop: each top-level command with the commands its script ran. */
async function monitor(port: number, names: Map<string, string>, whoOf: (clientPort: number) => string) {
  const cli = spawn('redis-cli', ['-p', String(port), 'monitor'], { stdio: ['ignore', 'pipe', 'ignore'] });
  // MONITOR_DUMP=<path>: MONITOR's lines as they came, to read a script's keys and arguments.
  if (process.env.MONITOR_DUMP) cli.stdout.pipe(createWriteStream(`${process.env.MONITOR_DUMP}.${Date.now()}`));
  const sent: Sent[] = [];
  createInterface({ input: cli.stdout }).on('line', (line) => {
    const m = /^\S+ \[\d+ ([^\]]+)\] "([^"]+)"(?: "([^"]*)")?/.exec(line);
    if (!m) return;
    const cmd = m[2]!.toLowerCase();
    // Redis prints a script's own commands (`lua`) right after the EVALSHA that ran them.
    if (m[1] === 'lua') return void sent.at(-1)?.inner.push(cmd);
    const what = cmd === 'evalsha' ? (names.get(m[3]!) ?? `script ${m[3]!.slice(0, 8)}`) : cmd;
    sent.push({ who: whoOf(Number(m[1]!.split(':')[1])), what, inner: [] });
  });
  await new Promise((r) => cli.stdout.once('data', r));
  return async () => {
    cli.kill();
    await new Promise((r) => cli.once('exit', r));
    return sent;
  };
}

/** The ledger: per call, each (sender, top-level command) with how often and its inner commands by name. */
function ledger(sent: Sent[], calls: number) {
  const rows = new Map<string, { n: number; inner: Map<string, number> }>();
  for (const s of sent) {
    if (['info', 'client', 'ping', 'monitor', 'config'].includes(s.what)) continue;
    const id = `${s.who} · ${s.what}`;
    let row = rows.get(id);
    if (!row) rows.set(id, (row = { n: 0, inner: new Map() }));
    row.n++;
    for (const c of s.inner) row.inner.set(c, (row.inner.get(c) ?? 0) + 1);
  }
  const per = (x: number) => round(x / calls, 3);
  let top = 0;
  let all = 0;
  const out = [...rows]
    .map(([id, r]) => {
      const inner = [...r.inner].reduce((s, [, n]) => s + n, 0);
      top += r.n;
      all += r.n + inner;
      return {
        id,
        perCall: per(r.n),
        innerPerCall: per(inner),
        inner: Object.fromEntries([...r.inner].sort((a, b) => b[1] - a[1]).map(([c, n]) => [c, per(n)])),
      };
    })
    .sort((a, b) => b.perCall + b.innerPerCall - (a.perCall + a.innerPerCall));
  return { topLevelPerCall: per(top), commandsPerCall: per(all), rows: out };
}

async function commandCount(admin: Redis): Promise<number> {
  let n = 0;
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (!['info', 'client', 'ping'].includes(m[1]!)) n += Number(m[2]);
  return n;
}

async function netBytes(admin: Redis): Promise<{ in: number; out: number; reads: number }> {
  const info = await admin.info('stats');
  const f = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return { in: f('total_net_input_bytes'), out: f('total_net_output_bytes'), reads: f('total_reads_processed') };
}

const port = await freePort();
const redisDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-ledger-'));
// As the shared Redis of `bench/query-only.ts` runs (no AOF): no fsync in Redis's CPU.
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', redisDir, '--save', '', '--appendonly', 'no'], {
  stdio: 'ignore',
});
const url = `redis://127.0.0.1:${port}`;
const admin = new Redis(url, { retryStrategy: () => 50 });
admin.on('error', () => undefined);
await admin.ping();
const redisPid = Number(/^process_id:(\d+)/m.exec(await admin.info('server'))![1]);
const site = benchSite(url, 'ledger', {
  WORKER_CONCURRENCY: '32',
  LOG_LEVEL: 'silent',
  REDIS_BYTES_PER_WORKSPACE: String(2 ** 40),
  ...(process.env.RATE_LIMITS ? { RATE_LIMITS: process.env.RATE_LIMITS } : {}),
});
const worker = await site.worker({}, process.env.WORKER_BIN);
const raw = await rawBullmq(url, `${site.config.prefix}-raw`, 32, true);
// The floor: raw BullMQ whose worker asks a forked child for the row (bench/raw-child-worker.ts).
const floor = await rawBullmq(url, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});
try {
  const ours = process.env.KIND === 'insert' ? await smallInsert(site.client) : await pkReadTable(site.client);
  const both = {
    agentdb: { call: ours, pid: worker.pid },
    raw: { call: (i: number) => raw.call(i).then(() => undefined), pid: raw.pid! },
    floor: { call: (i: number) => floor.call(i).then(() => undefined), pid: floor.pid! },
  };
  const only = process.env.SIDE as keyof typeof both | undefined;
  const sides: Partial<typeof both> = only ? { [only]: both[only] } : both;
  for (const { call } of Object.values(sides)) await drive(1000, IN_FLIGHT, call);
  const names = scriptNames();
  const ledgers: Record<string, ReturnType<typeof ledger>> = {};
  for (const [side, { call, pid }] of Object.entries(sides)) {
    const workerPorts = portsOf(pid);
    const stop = await monitor(port, names, (p) => (workerPorts.has(p) ? 'worker' : 'caller'));
    await drive(LEDGER_CALLS, IN_FLIGHT, call);
    ledgers[side] = ledger(await stop(), LEDGER_CALLS);
  }
  // 2. Time in Redis per command (SLOWLOG at 0 µs keeps every command with its execution time:
  // a script's whole run, its inner commands with it; not the parsing or the socket), by script.
  const timed: Record<string, Record<string, { perCall: number; usEach: number; p50: number }>> = {};
  for (const [side, { call }] of Object.entries(sides)) {
    await admin.config('SET', 'slowlog-max-len', String(LEDGER_CALLS * 120));
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.slowlog('RESET');
    await drive(LEDGER_CALLS, IN_FLIGHT, call);
    await admin.config('SET', 'slowlog-log-slower-than', '-1');
    const entries = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
    const by = new Map<string, { n: number; us: number; all: number[] }>();
    for (const [, , us, argv] of entries) {
      const cmd = String(argv[0]).toLowerCase();
      if (['info', 'config', 'slowlog', 'client', 'ping'].includes(cmd)) continue;
      const what = cmd === 'evalsha' ? (names.get(String(argv[1])) ?? `script ${String(argv[1]).slice(0, 8)}`) : cmd;
      const t = by.get(what) ?? { n: 0, us: 0, all: [] };
      t.n++;
      t.all.push(us);
      t.us += us;
      by.set(what, t);
    }
    let all = 0;
    for (const t of by.values()) all += t.us;
    const p50 = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1] ?? 0;
    timed[side] = Object.fromEntries([
      ['(all)', { perCall: round(all / LEDGER_CALLS, 2), usEach: 0, p50: 0 }] as const,
      ...[...by]
        .sort((a, b) => b[1].us - a[1].us)
        .map(([w, t]) => [w, { perCall: round(t.us / LEDGER_CALLS, 2), usEach: round(t.us / t.n, 2), p50: p50(t.all) }] as const),
    ]);
  }
  const cost: Record<string, { commands: number[]; bytesIn: number[]; bytesOut: number[]; socketReads: number[]; redisCpuUs: number[] }> = {};
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['agentdb', 'raw', 'floor'] as const) : (['floor', 'raw', 'agentdb'] as const);
    for (const side of order) {
      const one = sides[side];
      if (!one) continue;
      const c = (cost[side] ??= { commands: [], bytesIn: [], bytesOut: [], socketReads: [], redisCpuUs: [] });
      const [n0, b0, cpu0] = [await commandCount(admin), await netBytes(admin), cpuSeconds(redisPid)];
      await drive(CALLS, IN_FLIGHT, one.call);
      const [n1, b1, cpu1] = [await commandCount(admin), await netBytes(admin), cpuSeconds(redisPid)];
      c.commands.push(round((n1 - n0) / CALLS, 2));
      c.bytesIn.push(Math.round((b1.in - b0.in) / CALLS));
      c.bytesOut.push(Math.round((b1.out - b0.out) / CALLS));
      c.socketReads.push(round((b1.reads - b0.reads) / CALLS, 2));
      c.redisCpuUs.push(Math.round(((cpu1 - cpu0) * 1e6) / CALLS));
    }
  }
  console.log(
    JSON.stringify(
      { inFlight: IN_FLIGHT, ledgerCalls: LEDGER_CALLS, calls: CALLS, rounds: ROUNDS, load: os.loadavg().map((l) => round(l, 2)), ledgers, timed, cost },
      null,
      1,
    ),
  );
} finally {
  await raw.close();
  await floor.close();
  await site.close();
  admin.disconnect();
  server.kill();
  await new Promise((r) => server.once('exit', r));
  rmSync(redisDir, { recursive: true, force: true });
}
