// A full disk end to end, with a ledger of every answered write (fault review F2, session 27).
//
// One `agentdb worker` (this checkout's build) on a redis-server of its own, its data folder, its
// history folder and its blob folder each on a tmpfs of its own. Agents write under their own call
// ids all along; the driver fills the data tmpfs, then the history tmpfs, then the blob tmpfs (each
// for a stretch, then freed), runs `backup now` in each stretch and restores (`--into`, `--at`, and
// `--from-blob`) while full and afterwards, and checks every answer against the databases:
//
//   every write answered ok is in its database once, with the row id it was answered with;
//   no write answered failed without `mayStillRun` is in any;
//   a restore that answers ok holds every write acknowledged by its moment, and none sent after;
//   the service takes writes again without a restart once there is room.
//
// Root only (mount). Not part of the suite; `npm run build` first, then
//   node --import tsx bench/disk-full-ledger.ts            (STRETCH_S=20 per stretch by default)
// Prints a JSON report; the worker's log is kept at $OUT/worker.log (OUT: a temp folder).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { readUsage } from '../src/calls/usage.ts';
import { keysFor } from '../src/redis/keys.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import { runCli } from '../test/helpers/processes.ts';
import { fillDisk, mountTmpfs, unmountTmpfs } from '../test/helpers/tmpfs.ts';
import { startProcess } from './process.ts';

const STRETCH_MS = Number(process.env.STRETCH_S ?? 20) * 1000;
const LOOPS_PER_AGENT = Number(process.env.LOOPS ?? 3);
const PAD = Number(process.env.PAD ?? 400);
const AGENTS = ['a0', 'a1', 'a2', 'a3'];
const WS = 'f2';

interface Answer {
  agent: string;
  cid: string;
  sent: number;
  answered: number;
  ok: boolean;
  code?: string;
  mayStillRun?: boolean;
  rowid?: number;
}

const out = process.env.OUT ?? fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-f2-'));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-f2-mnt-'));
const dataDir = path.join(root, 'data');
const blobDir = path.join(root, 'blobs');
const historyDir = path.join(dataDir, 'history');
const mounts: string[] = [];

function mount(dir: string, size: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const refused = mountTmpfs(dir, size);
  if (refused) throw new Error(`cannot mount a tmpfs on ${dir}: ${refused}`);
  mounts.push(dir);
}

const marks: Record<string, number> = {};
const mark = (name: string) => {
  marks[name] = Date.now();
  console.error(`${new Date().toISOString()} ${name}`);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Fills `dir`'s file system for a stretch; what runs during it is `during`. */
async function fullStretch(name: string, dir: string, during: () => Promise<void>): Promise<void> {
  const file = path.join(dir, `.fill-${name}`);
  const filled = fillDisk(file);
  mark(`${name}.full`);
  await during();
  fs.ftruncateSync(filled.fd, 0);
  fs.closeSync(filled.fd);
  fs.rmSync(file);
  mark(`${name}.freed`);
}

async function main(): Promise<void> {
  mount(dataDir, '128m');
  mount(historyDir, '512m');
  mount(blobDir, '512m');
  const redis = await OwnRedis.start();
  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    AGENTDB_PREFIX: 'f2',
    AGENTDB_DATA_DIR: dataDir,
    BLOB_DIR: blobDir,
    SHARD_COUNT: '4',
    EXECUTOR_POOL_SIZE: '2',
    RATE_LIMITS: 'off',
    LEASE_TTL_MS: '3000',
    LOG_LEVEL: 'info',
  };
  const config = loadConfig(env);
  const log = fs.createWriteStream(path.join(out, 'worker.log'));
  const { child: worker } = await startProcess(process.execPath, [path.resolve('dist/bin/agentdb.js'), 'worker'], env, /"msg":"worker ready"/);
  worker.stdout!.pipe(log);
  worker.stderr!.pipe(log);
  const client = new AgentDbClient({ redisUrl: redis.url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: false });
  const who = (agent: string) => ({ workspace: WS, agent, settings: { database: 'agent' as const } });
  for (const agent of AGENTS) {
    const made = await client.call({
      ...who(agent),
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, cid TEXT NOT NULL, pad TEXT)' },
    });
    if (!made.ok) throw new Error(JSON.stringify(made));
  }

  const answers: Answer[] = [];
  let stop = false;
  let seq = 0;
  const loop = async (agent: string, n: number) => {
    while (!stop) {
      const cid = `${agent}-${n}-${++seq}`;
      const sent = Date.now();
      const env = await client.call(
        { ...who(agent), tool: 'DATA_WRITE_SQL', callId: cid, arguments: { sql: 'INSERT INTO t (cid, pad) VALUES (?, ?)', params: [cid, 'x'.repeat(PAD)] } },
        { timeoutMs: 60_000 },
      );
      const a: Answer = { agent, cid, sent, answered: Date.now(), ok: env.ok };
      if (env.ok) a.rowid = Number((env.result as { lastInsertRowid?: number }).lastInsertRowid);
      else {
        a.code = env.error.code;
        if ((env as { mayStillRun?: boolean }).mayStillRun) a.mayStillRun = true;
      }
      answers.push(a);
      // A refusal answers at once: no hot loop against a full disk.
      if (!env.ok) await sleep(50);
    }
  };
  const loops = AGENTS.flatMap((agent) => Array.from({ length: LOOPS_PER_AGENT }, (_, n) => loop(agent, n)));

  const cli = async (label: string, args: string[]) => {
    const t = Date.now();
    const r = await runCli(args, { ...env, LOG_LEVEL: 'silent' });
    const line = { label, at: t, ms: Date.now() - t, code: r.code, stdout: r.stdout.trim().slice(0, 2000), stderr: r.stderr.trim().slice(0, 2000) };
    cliRuns.push(line);
    return line;
  };
  const cliRuns: { label: string; at: number; ms: number; code: number | null; stdout: string; stderr: string }[] = [];
  const restores: { label: string; agent: string; into: string; at: number; fromBlob?: boolean }[] = [];
  let forks = 0;
  const restoreInto = async (label: string, agent: string, at: number, fromBlob = false) => {
    const into = `r${++forks}`;
    restores.push({ label, agent, into, at, fromBlob });
    const args = ['restore', `${WS}/${agent}`, '--at', new Date(at).toISOString(), '--into', `${WS}/${into}`, '--json'];
    if (fromBlob) args.splice(2, 0, '--from-blob');
    return cli(`restore ${label} ${agent}→${into}`, args);
  };

  mark('start');
  await sleep(STRETCH_MS / 2);
  mark('before-full');
  await cli('backup before', ['backup', 'now']);

  // 1. The data disk: databases, their WALs, the call-id ledger, answered.json.
  await fullStretch('data', dataDir, async () => {
    await sleep(STRETCH_MS / 2);
    mark('data.mid');
    await cli('backup data-full', ['backup', 'now']);
    await restoreInto('while data full, to before', AGENTS[0]!, marks['before-full']!);
    await sleep(STRETCH_MS / 2);
  });
  await sleep(STRETCH_MS / 2);
  mark('data.after');

  // 2. History's volume: copies fail, writes go on while the WAL holds them (HISTORY_MAX_BEHIND_BYTES).
  await fullStretch('history', historyDir, async () => {
    await sleep(STRETCH_MS / 2);
    mark('history.mid');
    await cli('backup history-full', ['backup', 'now']);
    await restoreInto('while history full, to mid', AGENTS[1]!, marks['history.mid']!);
    await sleep(STRETCH_MS / 2);
  });
  await sleep(STRETCH_MS / 2);
  mark('history.after');

  // 3. The blob store's folder: backups cannot be written.
  await fullStretch('blob', blobDir, async () => {
    await sleep(STRETCH_MS / 4);
    mark('blob.mid');
    await cli('backup blob-full', ['backup', 'now']);
    await sleep(STRETCH_MS / 4);
  });
  await cli('backup after', ['backup', 'now']);
  await sleep(STRETCH_MS / 2);
  mark('end');
  stop = true;
  await Promise.all(loops);

  // Restores to moments while and after each disk was full, every agent.
  const moments = [
    'before-full',
    'data.full',
    'data.mid',
    'data.freed',
    'data.after',
    'history.full',
    'history.mid',
    'history.freed',
    'history.after',
    'blob.mid',
    'end',
  ];
  for (const m of moments) for (const agent of AGENTS) await restoreInto(m, agent, marks[m]!);
  // From the blob store: the backups' moments (the latest backed up at or before each).
  for (const m of ['data.mid', 'history.mid', 'end']) for (const agent of AGENTS.slice(0, 2)) await restoreInto(`blob ${m}`, agent, marks[m]!, true);

  // The checks.
  const rowsOf = (agent: string) => {
    const file = databasePath(dataDir, WS, agent, shardOf(`${WS}/${agent}`, config.shardCount));
    if (!fs.existsSync(file)) return undefined;
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare('SELECT id, cid FROM t').all() as { id: number; cid: string }[];
    } finally {
      db.close();
    }
  };
  const report: Record<string, unknown> = { out, marks: Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, new Date(v).toISOString()])) };
  const byCode: Record<string, number> = {};
  for (const a of answers)
    if (!a.ok) byCode[`${a.code}${a.mayStillRun ? ' mayStillRun' : ''}`] = (byCode[`${a.code}${a.mayStillRun ? ' mayStillRun' : ''}`] ?? 0) + 1;
  const live = {
    ok: 0,
    foundOnce: 0,
    missing: [] as string[],
    doubled: [] as string[],
    wrongRowid: [] as string[],
    failedButPresent: [] as string[],
    mayStillRunPresent: 0,
  };
  for (const agent of AGENTS) {
    const rows = rowsOf(agent) ?? [];
    const count = new Map<string, number[]>();
    for (const r of rows) count.set(r.cid, [...(count.get(r.cid) ?? []), r.id]);
    for (const a of answers.filter((x) => x.agent === agent)) {
      const ids = count.get(a.cid) ?? [];
      if (a.ok) {
        live.ok++;
        if (ids.length === 1) live.foundOnce++;
        if (ids.length === 0) live.missing.push(a.cid);
        if (ids.length > 1) live.doubled.push(a.cid);
        if (ids.length === 1 && ids[0] !== a.rowid) live.wrongRowid.push(`${a.cid}: ${a.rowid} answered, ${ids[0]} in db`);
      } else if (a.mayStillRun) {
        if (ids.length) live.mayStillRunPresent++;
      } else if (ids.length) live.failedButPresent.push(`${a.cid} ${a.code}`);
    }
  }
  const okAfter = (m: string) => answers.filter((a) => a.ok && a.sent >= marks[m]!).length;
  const refusedAfter = (m: string, within: number) => answers.filter((a) => !a.ok && a.sent >= marks[m]! + within).map((a) => `${a.cid} ${a.code}`);
  const restoreChecks = restores.map((r) => {
    const run = cliRuns.find((c) => c.label === `restore ${r.label} ${r.agent}→${r.into}`)!;
    const base = { label: r.label, agent: r.agent, at: new Date(r.at).toISOString(), exit: run.code };
    if (run.code !== 0) return { ...base, answered: run.stdout || run.stderr };
    const rows = rowsOf(r.into);
    if (!rows) return { ...base, answered: 'ok, but no file' };
    const have = new Map<string, number>();
    for (const row of rows) have.set(row.cid, (have.get(row.cid) ?? 0) + 1);
    const mine = answers.filter((a) => a.agent === r.agent);
    // From the blob store: the moment the backups reach (at most --at), as the answer says.
    const restoredTo = r.fromBlob ? Date.parse((JSON.parse(run.stdout) as { restoredTo: string }).restoredTo) : r.at;
    const missing = mine.filter((a) => a.ok && a.answered <= restoredTo && !have.has(a.cid)).map((a) => a.cid);
    const later = mine.filter((a) => a.sent > restoredTo && have.has(a.cid)).map((a) => a.cid);
    const doubled = [...have].filter(([, n]) => n > 1).map(([c]) => c);
    const failed = mine.filter((a) => !a.ok && !a.mayStillRun && have.has(a.cid)).map((a) => a.cid);
    const heldAcks = mine.filter((a) => a.ok && a.answered <= restoredTo).length;
    return {
      ...base,
      ...(r.fromBlob ? { restoredTo: new Date(restoredTo).toISOString() } : {}),
      rows: rows.length,
      acksByMoment: heldAcks,
      missing: missing.slice(0, 10),
      missingCount: missing.length,
      sentAfterPresent: later.length,
      doubled: doubled.length,
      failedPresent: failed.length,
    };
  });
  const usage = await readUsage(new (await import('ioredis')).Redis(redis.url), keysFor(config.prefix), WS);
  report.answers = answers.length;
  report.ok = live.ok;
  report.failedByCode = byCode;
  report.live = {
    ...live,
    missing: live.missing.slice(0, 20),
    missingCount: live.missing.length,
    doubled: live.doubled.slice(0, 20),
    wrongRowid: live.wrongRowid.slice(0, 20),
    failedButPresent: live.failedButPresent.slice(0, 20),
  };
  report.okSentAfter = { 'data.freed': okAfter('data.freed'), 'history.freed': okAfter('history.freed'), 'blob.freed': okAfter('blob.freed') };
  report.refusedLongAfterFreed = {
    data: refusedAfter('data.freed', 3000)
      .filter((x) => answers.find((a) => `${a.cid} ${a.code}` === x)!.sent < marks['history.full']!)
      .slice(0, 10),
    history: refusedAfter('history.freed', 3000)
      .filter((x) => answers.find((a) => `${a.cid} ${a.code}` === x)!.sent < marks['blob.full']!)
      .slice(0, 10),
    end: refusedAfter('blob.freed', 3000).slice(0, 10),
  };
  report.meteredWrites = usage.filter((u) => u.tool === 'DATA_WRITE_SQL').reduce((n, u) => n + u.calls, 0);
  report.cli = cliRuns
    .filter((c) => !c.label.startsWith('restore '))
    .map((c) => ({ label: c.label, code: c.code, ms: c.ms, out: (c.stdout || c.stderr).slice(0, 600) }));
  report.restores = restoreChecks;
  fs.writeFileSync(path.join(out, 'answers.json'), JSON.stringify(answers));
  fs.writeFileSync(path.join(out, 'cli.json'), JSON.stringify(cliRuns, null, 1));
  fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(report, null, 1));
  console.log(JSON.stringify(report, null, 1));

  await client.close();
  await new Promise<void>((resolve) => {
    worker.once('exit', () => resolve());
    worker.kill('SIGTERM');
  });
  await redis.remove();
}

function cleanup(): void {
  for (const dir of mounts.reverse()) {
    try {
      unmountTmpfs(dir);
    } catch (err) {
      console.error(`could not unmount ${dir}: ${String(err)}`);
    }
  }
  fs.rmSync(root, { recursive: true, force: true });
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(cleanup);
