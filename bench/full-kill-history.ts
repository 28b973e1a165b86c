// Session 30, F6: an attempt at a focused repro of the ledger's run 3 holes (restores answered ok
// with acknowledged rows missing, restored files malformed; docs/benchmarks.md, "Session 30, F6"
// (g)). It did NOT reproduce them (0 holes in four tries). One `agentdb worker`, four databases
// written at once; the data tmpfs filled while their commits go on into the WAL's reused room
// (HISTORY_CHECKPOINT_BYTES small) and history's copies fail; restores --into of each during the
// full disk (ROOM_KB: that much room given back first, as others' files shrinking would);
// KILL=1: the owner SIGKILLed during the full disk and another started; then room back. Restores
// --into at a moment every 0.7 s, each checked against the writes acknowledged by then.
//   root; npm run build; CHECKPOINT=262144 DATA_SIZE=128m [ROOM_KB=6000] [KILL=1] node --import tsx bench/full-kill-history.ts
// Session 30, G8: it does reproduce them, with ROOM_KB=6000 and no KILL: holes in 3 of the first 5 runs (one database
// each: restores after the full disk answer ok with the rows of a `gap` generation's snapshot, nothing after it). Before
// its restores it prints what the worker's processes hold open of a-d's files (a -wal or -shm "(deleted)": capture
// reading a WAL no longer the database's), and the rows a new connection sees; KEEP=dir keeps the data folder.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import { runCli, startCli } from '../test/helpers/processes.ts';
import { fillDisk, mountTmpfs, unmountTmpfs } from '../test/helpers/tmpfs.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-fkh-'));
const procs: ChildProcess[] = [];
let redis: OwnRedis | undefined;

async function main(): Promise<void> {
  const refused = mountTmpfs(root, process.env.DATA_SIZE ?? '64m');
  if (refused) throw new Error(refused);
  redis = await OwnRedis.start();
  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    AGENTDB_PREFIX: 'fkh',
    AGENTDB_DATA_DIR: path.join(root, 'data'),
    BLOB_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-fkh-blobs-')),
    SHARD_COUNT: '1',
    EXECUTOR_POOL_SIZE: '2',
    RATE_LIMITS: 'off',
    LEASE_TTL_MS: '2000',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '2000',
    HISTORY_CHECKPOINT_BYTES: process.env.CHECKPOINT ?? '65536',
  };
  const config = loadConfig(env);
  const client = new AgentDbClient({ redisUrl: redis.url, prefix: 'fkh', shardCount: 1, rateLimits: false });
  const AGENTS = ['a', 'b', 'c', 'd'];
  let n = 0;
  const acked: { cid: string; at: number; agent: string }[] = [];
  const write = async (sql: string, params: unknown[] = [], agent = 'a') => {
    const who = { workspace: 'w', agent, settings: { database: 'agent' as const } };
    const cid = `c${++n}`;
    for (;;) {
      const a = (await client.call({ ...who, tool: 'DATA_WRITE_SQL', callId: cid, arguments: { sql, params } }, { timeoutMs: 8000 })) as {
        ok: boolean;
        error?: { code: string };
        mayStillRun?: boolean;
      };
      if (a.ok) return acked.push({ cid, at: Date.now(), agent });
      if (a.error?.code === 'STORAGE_FULL' && !a.mayStillRun) return undefined;
      await sleep(100);
    }
  };
  const rows = async (k: number, tag: string, agent = 'a') => {
    let ok = 0;
    for (let i = 0; i < k; i++) if (await write('INSERT INTO t (tag, pad) VALUES (?, ?)', [`${tag}${i}`, 'x'.repeat(300)], agent)) ok++;
    return ok;
  };
  // Every agent writing at once for `ms`.
  const busy = async (ms: number, tag: string) => {
    const until = Date.now() + ms;
    const counts = await Promise.all(
      AGENTS.map(async (agent) => {
        let ok = 0;
        while (Date.now() < until) ok += await rows(1, `${tag}${agent}${ok}-`, agent).then((x) => x);
        return ok;
      }),
    );
    return counts.join('/');
  };
  const start = async () => {
    const p = await startCli(['worker'], env);
    p.stdout!.resume();
    p.stderr!.on('data', (d) => fs.appendFileSync(path.join(os.tmpdir(), 'fkh.log'), d));
    procs.push(p);
    return p;
  };
  const moments: { label: string; at: number }[] = [];
  const mark = async (label: string) => {
    moments.push({ label, at: Date.now() });
  };

  let a = await start();
  // Session 30, G8: STRACE=prefix traces the worker's executor children's opens and closes (paths shown) into prefix.<pid>.
  if (process.env.STRACE) {
    const kids = fs.readFileSync(`/proc/${a.pid}/task/${a.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    for (const kid of kids) {
      const tracer = spawn('strace', ['-f', '-tt', '-y', '-e', 'trace=openat,close', '-o', `${process.env.STRACE}.${kid}`, '-p', kid], { stdio: 'ignore' });
      procs.push(tracer);
    }
    await sleep(500);
  }
  for (const agent of AGENTS) await write('CREATE TABLE t (id INTEGER PRIMARY KEY, tag TEXT, pad TEXT)', [], agent);
  console.error('before', await busy(Number(process.env.BEFORE_MS ?? 8000), 'b'));
  await mark('before the fill');
  const file = path.join(root, 'fill');
  // NOFILL=1: the same run with the disk never filled (restores --into during the writes all the same).
  const filled = process.env.NOFILL === '1' ? { fd: fs.openSync(file, 'w'), size: 0 } : fillDisk(file);
  const marking = setInterval(() => void mark('tick'), 700);
  // Restores --into of each database while the disk is full, the writes going on (run 3's r26, r27).
  const during = (async () => {
    await sleep(1500);
    // A little room comes back (others' files cut back, a process gone): the restores take it.
    const room = Number(process.env.ROOM_KB ?? 0) * 1024;
    if (room && filled.size) fs.ftruncateSync(filled.fd, filled.size - room);
    const out: string[] = [];
    for (const agent of AGENTS) {
      const run = await runCli(['restore', `w/${agent}`, '--at', new Date(Date.now() - 1000).toISOString(), '--into', `w/during${agent}`, '--json'], {
        ...env,
        LOG_LEVEL: 'silent',
      });
      out.push(`${agent}: exit ${run.code} ${run.code ? run.stdout.slice(0, 80) : ''}`);
    }
    return out.join('; ');
  })();
  console.error('full', await busy(Number(process.env.FULL_MS ?? 6000), 'f'));
  console.error('restores during the full disk:', await during);
  await mark('full');
  if (process.env.KILL === '1') {
    const gone = new Promise((r) => a.once('exit', r));
    a.kill('SIGKILL');
    await gone;
    a = await start();
    console.error('full, owner B', await busy(3000, 'fb'));
    await mark('full, B');
  }
  fs.ftruncateSync(filled.fd, 0);
  fs.closeSync(filled.fd);
  fs.rmSync(file);
  console.error('room back', await busy(5000, 'r'));
  clearInterval(marking);
  await mark('room back');
  await sleep(1500);

  // Session 30, G8: files the worker's executor children hold open that are gone from the folder (a -wal or -shm
  // deleted and made again under a handle, a database renamed over).
  for (const p of procs.filter((x) => x.exitCode === null && x.signalCode === null)) {
    const kids = fs.existsSync(`/proc/${p.pid}/task/${p.pid}/children`)
      ? fs.readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)
      : [];
    for (const pid of [String(p.pid), ...kids]) {
      let fds: string[] = [];
      try {
        fds = fs.readdirSync(`/proc/${pid}/fd`);
      } catch {}
      const gone = fds
        .map((fd) => {
          try {
            return fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
          } catch {
            return '';
          }
        })
        .filter((l) => l.includes(root) && (l.endsWith('(deleted)') || /\/[a-d]\.sqlite/.test(l)));
      console.log(
        `open (a-d's files, and any deleted), pid ${pid}${pid === String(p.pid) ? ' (worker)' : ''}: ${gone.length ? gone.map((g) => path.relative(root, g)).join(', ') : 'none'}`,
      );
    }
  }
  // A connection of its own (read-only) sees what the live -wal and the file hold: fewer rows than acknowledged means
  // a connection commits into a -wal no longer in the folder.
  for (const agent of AGENTS) {
    const want = acked.filter((x) => x.agent === agent).length - 1;
    try {
      const d = new Database(databasePath(env.AGENTDB_DATA_DIR!, 'w', agent, 0), { readonly: true, fileMustExist: true });
      console.log(`live w/${agent}: ${d.prepare('SELECT count(*) FROM t').pluck().get()} rows seen by a new connection, ${want} acknowledged`);
      d.close();
    } catch (err) {
      console.log(`live w/${agent}: ${String(err)}`);
    }
  }
  const dataDir = env.AGENTDB_DATA_DIR!;
  console.log(`fill ${new Date(moments.find((m) => m.label === 'before the fill')!.at).toISOString()}`);
  let k = 0;
  let holes = 0;
  for (const m of moments)
    for (const agent of AGENTS) {
      const into = `w/r${++k}`;
      const run = await runCli(['restore', `w/${agent}`, '--at', new Date(m.at).toISOString(), '--into', into, '--json'], { ...env, LOG_LEVEL: 'silent' });
      const want = acked.filter((x) => x.agent === agent && x.at <= m.at && !x.cid.startsWith('create')).length - 1;
      let got: string;
      try {
        const d = new Database(databasePath(dataDir, 'w', `r${k}`, shardOf(into, config.shardCount)), { readonly: true });
        const c = d.prepare('SELECT count(*) FROM t').pluck().get() as number;
        got = `${c} rows`;
        if (c < want) holes++;
        d.close();
      } catch (err) {
        got = String(err);
        if (!run.code) holes++;
      }
      if (run.code || !(Number.parseInt(got, 10) >= want))
        console.log(
          `${m.label} ${new Date(m.at).toISOString()} ${agent}: restore exit ${run.code}, ${got}, acknowledged >= ${want}${run.code ? ` ${run.stdout.slice(0, 200)}` : ''}`,
        );
    }
  console.log(`restores ${k}, holes ${holes}`);
  await client.close();
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await sleep(1500);
    await redis?.remove();
    // Session 30, G8: KEEP=dir keeps a copy of the data folder (databases, history) to look at.
    if (process.env.KEEP) fs.cpSync(path.join(root, 'data'), process.env.KEEP, { recursive: true, preserveTimestamps: true });
    unmountTmpfs(root);
    fs.rmSync(root, { recursive: true, force: true });
    process.exit();
  });
