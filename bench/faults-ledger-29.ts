// Faults with a ledger of every acknowledged and every refused write (session 29, F4).
//
// The real processes of this checkout's build: `agentdb start` (HTTP, shard workers, scheduler)
// and one `agentdb worker`, on a redis-server of the driver's own (AOF, fsync always), the data
// folder (history inside it) on a tmpfs the driver mounts, the blob store on another. Five lanes
// write all along, each into its own database, each write under a call id of its own:
//   lib     the client library (a registered agent, as a trusted caller)
//   slow    the client library, a write that computes for ~50-150 ms (so kills land mid-statement)
//   v1      an agent key over POST /v1/calls
//   mcp     an agent key over /mcp tools/call (`_meta` agentdb/callId)
//   member  a member key over POST /v1/calls, into the shared database
// Every answer is kept. A status, `mayStillRun`, a transport error or `UNAUTHENTICATED` (the
// instant between an empty Redis and the registry put back) is sent again under the same id;
// a retryable refusal (`STORAGE_FULL`, `UNAVAILABLE`, ...) is sent again half the time, else
// it stays refused. Meanwhile a loop runs `agentdb restore DB --at <a whole second> --into` and
// `agentdb backup now`, and faults land at random moments, in a shuffled order, FAULT_ROUNDS each:
//   worker  SIGKILL of `agentdb start` or `agentdb worker` (in turn), started again
//   child   SIGKILL of one process's executor children
//   full    the data tmpfs filled for 3-8 s, then freed
//   empty   Redis SIGKILLed, started again empty, the registry put back (an operator's copy)
//   aof     Redis SIGKILLed, started again from its AOF
// Session 29, F5 added (FAULTS=...,idle,stopw,stopr,misconf):
//   idle    SIGKILL of `agentdb worker`, its children listed first: each must exit by itself
//           (counted: childrenLeft); also once before the lanes start, every child idle
//   stopw   SIGSTOP of `agentdb start` or `agentdb worker` (in turn) for 10 s, then SIGCONT
//   stopr   SIGSTOP of Redis for 10 s, then SIGCONT
//   misconf Redis's own --dir (a tmpfs of REDIS_DIR_SIZE) filled for 3-8 s, then freed; a Redis
//           that exited on it (AOF write error under appendfsync always) started again from its AOF
//   misconfe the same under appendfsync everysec (set for the fault): Redis answers MISCONF to
//           writes until a write of its AOF works again
// and checks: no write answered ok is later answered a refusal without mayStillRun (okThenNotRun),
// and the workspace's budget sum (`held`) equals the sum of its ledger's members after the run.
// Session 30, F6 added: each `full` runs a restore --into while the disk is full, every restore
// keeps its span, and the report counts the restores that overlapped a full disk apart
// (restores.duringFull: answered ok, each checked like the others, or refused, and how);
// the data tmpfs grows (END_DATA_SIZE) once the lanes stop, so the end's restores and the
// driver's reads of them are not refused by the disk the run's restores filled (F5's (e)).
// Checked at the end: every write answered ok is in its database once, with its row id; no write
// whose last answer is a refusal without mayStillRun is there (counted apart, notSentAfterMayRun:
// an UNAVAILABLE "not sent" after an earlier send of the id was answered may still run or queued); no answer without mayStillRun
// says failed for a write that is there; the ok answers of one id agree; sent again under its id
// (every acknowledged write, after the run), each answers its first outcome and doubles nothing;
// each restore that answered ok holds every write acknowledged by its moment and none sent after;
// a `--from-blob` restore of each database at the end, by its restoredTo; after the run, a restore
// to the second after each fault's end.
// Session 31, F8 added a sixth lane, `place` (the client library, its own database), restored in
// place during each full disk (beside the restore --into), and half the time (ROOM_P) 2-8 MB given
// back a second into the full disk so those restores get under way on a nearly full disk. A
// restore in place that answered ok may take back the writes acknowledged after its moment and
// before its answer (counted: inPlace.undoneWrites); every other acknowledged write of `place` is
// checked as the others' are, live and in each restore --into by its moment.
//
// Session 32, F9 added CUT_KILL=1: `agentdb worker`'s executor children SIGKILL themselves between
// SQLite's failed commit on a full disk and their cut of its frames (`uncommitted-tail.ts`), each
// time, so the next open must cut them (`unentered-tail.ts`).
//
// Session 33, F10 added FAULTS=...,emptyfull: Redis SIGKILLed and started again empty on its own
// full disk (the registry put back once it has room).
//
// Root only (mount). `npm run build`, then
//   RUN_S=120 FAULT_ROUNDS=2 [FAULT_STREAMS=2] node --import tsx bench/faults-ledger-29.ts
// FAULT_STREAMS=2 runs the plan twice at once, in two orders, so faults overlap (one per resource at a time).
// Prints a JSON report; $OUT (a temp folder) keeps it, the answers and the processes' logs.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { MemberRegistry } from '../src/registry/members.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { AUDIT_TABLE } from '../src/sqlite/sqlite-audit.ts';
import { freePort, OwnRedis } from '../test/helpers/own-redis.ts';
import { runCli, startCli } from '../test/helpers/processes.ts';
import { fillDisk, growTmpfs, mountTmpfs, unmountTmpfs } from '../test/helpers/tmpfs.ts';

const RUN_MS = Number(process.env.RUN_S ?? 120) * 1000;
const ROUNDS = Number(process.env.FAULT_ROUNDS ?? 2);
const STREAMS = Number(process.env.FAULT_STREAMS ?? 1);
const KINDS = (process.env.FAULTS ?? 'worker,child,full,empty,aof,idle,stopw,stopr,misconf,misconfe').split(',').filter(Boolean);
const WS = 'f4';
const LANES = ['lib', 'slow', 'v1', 'mcp', 'member', 'place'] as const;
type Lane = (typeof LANES)[number];
const agentOf: Record<Lane, string | undefined> = { lib: 'alib', slow: 'aslow', v1: 'av1', mcp: 'amcp', member: undefined, place: 'aplace' };
const RETRYABLE = new Set(['STORAGE_FULL', 'UNAVAILABLE', 'RETRY_LATER', 'RESTORE_RUNNING', 'RESOURCE_LIMIT', 'INTERNAL']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

interface Answer {
  at: number;
  ok?: boolean;
  code?: string;
  mayStillRun?: boolean;
  status?: string;
  rowid?: number;
  error?: string;
  message?: string;
  /** A late ok's `takenBack`: the undo id of the restore in place that took the write back (session 38, F19). */
  takenBack?: string;
}
interface Write {
  lane: Lane;
  cid: string;
  sent: number;
  answers: Answer[];
  outcome?: 'ok' | 'failed';
  /** When the answer that settled it came. */
  settled?: number;
}
interface Envelope {
  ok?: boolean;
  status?: string;
  mayStillRun?: boolean;
  error?: { code: string; message?: string };
  result?: { lastInsertRowid?: number; takenBack?: { undoId: string } };
  takenBack?: { undoId: string };
}

const out = process.env.OUT ?? fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-f4-'));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-f4-mnt-'));
const dataDir = path.join(root, 'data');
const blobDir = path.join(root, 'blobs');
const mounts: string[] = [];
const procs: Record<'start' | 'worker', ChildProcess | undefined> = { start: undefined, worker: undefined };
let ownRedis: OwnRedis | undefined;

function mount(dir: string, size: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const refused = mountTmpfs(dir, size);
  if (refused) throw new Error(`cannot mount a tmpfs on ${dir}: ${refused}`);
  mounts.push(dir);
}

async function main(): Promise<void> {
  mount(dataDir, process.env.DATA_SIZE ?? '512m');
  mount(blobDir, '512m');
  // Not at 127.0.0.1: `agentdb start` restarted while this Redis was down (exited on its full
  // disk) started a redis-server of its own on the port (`ensureRedis`, for a local URL), the
  // "stray" of F11's and F14's runs, which held the port through every later Redis fault.
  const redis = await OwnRedis.start('127.0.0.2');
  ownRedis = redis;
  // Redis's own folder on a tmpfs of its own (the misconf fault fills it): started again there.
  await redis.stop();
  redis.wipe();
  mount(redis.dir, process.env.REDIS_DIR_SIZE ?? '1g');
  await redis.start();
  const redisProc = () => (redis as unknown as { proc?: ChildProcess }).proc;
  const port = await freePort();
  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    AGENTDB_PREFIX: WS,
    AGENTDB_DATA_DIR: dataDir,
    BLOB_DIR: blobDir,
    SHARD_COUNT: '4',
    EXECUTOR_POOL_SIZE: '2',
    RATE_LIMITS: 'off',
    LEASE_TTL_MS: '2000',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '2000',
    HTTP_WAIT_MS: '3000',
    PORT: String(port),
  };
  const config = loadConfig(env);
  const keys = keysFor(config.prefix);
  const r = new Redis(redis.url, { maxRetriesPerRequest: null });
  r.on('error', () => undefined);
  await new WorkspaceRegistry(r, keys).put(WS, 'pro');
  const members = new MemberRegistry(r, keys);
  const agents = new AgentRegistry(r, keys);
  const key: Record<string, string> = { member: (await members.add(WS, 'ada', 'admin')).key };
  for (const lane of LANES) {
    const agent = agentOf[lane];
    if (!agent) continue;
    await agents.put(WS, agent, { displayName: agent, settings: { database: 'agent' } });
    key[lane] = (await new AgentKeyRing(r, keys, agents).mint(WS, agent)).key;
  }
  // The registry as an operator keeps it: put back after Redis comes back empty.
  const registry: [string, Buffer][] = [];
  for (const k of await r.keys(`${config.prefix}:*`)) registry.push([k, (await r.dumpBuffer(k))!]);

  const restartsRefused: string[] = [];
  const unexpectedExits: { which: string; at: string; code: number | null; signal: string | null; tail: string }[] = [];
  const killing = new Set<ChildProcess>();
  let stopping = false;
  // Faults of two streams may overlap (a worker killed while the disk is full), but one thing is
  // broken by one fault at a time: each takes its resource's turn.
  const turns: Record<string, Promise<unknown>> = {};
  const inTurn = <T>(resource: string, fn: () => Promise<T>): Promise<T> => {
    const next = (turns[resource] ?? Promise.resolve()).then(fn);
    turns[resource] = next.catch(() => undefined);
    return next;
  };
  const logs = fs.createWriteStream(path.join(out, 'processes.log'));
  const startProc = async (which: 'start' | 'worker') => {
    // A process started while Redis is stopped or down exits at once (it checks Redis first):
    // started again, as a supervisor would.
    let p: Awaited<ReturnType<typeof startCli>> | undefined;
    for (let tries = 1; !p; tries++) {
      try {
        p = await startCli([which], which === 'worker' && process.env.CUT_KILL === '1' ? { ...env, AGENTDB_TEST_KILL_BEFORE_TAIL_CUT: '1' } : env);
      } catch (err) {
        if (tries >= 60) throw err;
        restartsRefused.push(`${new Date().toISOString()} ${which}: ${String((err as Error).message).slice(0, 160)}`);
        await sleep(1000);
      }
    }
    p.stdout!.pipe(logs, { end: false });
    p.stderr!.pipe(logs, { end: false });
    // The last of what it printed, for an exit nobody asked for.
    let tail = p.readyLog.slice(-2000);
    const keep = (d: Buffer) => {
      tail = (tail + String(d)).slice(-4000);
    };
    p.stdout!.on('data', keep);
    p.stderr!.on('data', keep);
    p.removeAllListeners('exit');
    procs[which] = p;
    // A process that ends by itself is counted (a finding) and started again, as a supervisor would.
    p.once('exit', (code, signal) => {
      if (killing.has(p) || stopping) return;
      unexpectedExits.push({ which, at: new Date().toISOString(), code, signal, tail: tail.slice(-1500) });
      console.error(`${new Date().toISOString()} ${which} exited by itself (${code ?? signal})`);
      void inTurn(which, async () => {
        // Unless a fault in its turn started it again meanwhile.
        if (procs[which] === p) await startProc(which);
      });
    });
  };
  await startProc('start');
  await startProc('worker');
  const base = `http://127.0.0.1:${port}`;
  const client = new AgentDbClient({ redisUrl: redis.url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: false });
  const headers = (lane: Lane) => ({
    authorization: `Bearer ${key[lane]}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  });
  const sqlOf = (lane: Lane) =>
    lane === 'slow'
      ? 'INSERT INTO t (cid, pad) SELECT ?, (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000) SELECT max(x) FROM c)'
      : 'INSERT INTO t (cid, pad) VALUES (?, ?)';
  const paramsOf = (lane: Lane, cid: string) => (lane === 'slow' ? [cid] : [cid, 'x'.repeat(300)]);

  /** One send of a write by its lane's surface, as an envelope. */
  const send = async (lane: Lane, cid: string, sql: string, params: unknown[]): Promise<Envelope> => {
    const args = { sql, params };
    if (lane === 'lib' || lane === 'slow' || lane === 'place')
      return (await client.call(
        { workspace: WS, agent: agentOf[lane]!, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', callId: cid, arguments: args },
        { timeoutMs: 8000 },
      )) as Envelope;
    if (lane === 'mcp') {
      const res = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: headers(lane),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'DATA_WRITE_SQL', arguments: args, _meta: { 'agentdb/callId': cid } },
        }),
      });
      const text = await res.text();
      const json = text.startsWith('{')
        ? JSON.parse(text)
        : JSON.parse(
            text
              .split('\n')
              .find((l) => l.startsWith('data:'))!
              .slice(5),
          );
      if (!json.result) return { ok: false, error: { code: `JSONRPC ${JSON.stringify(json.error ?? json).slice(0, 80)}` } };
      const sc = json.result.structuredContent ?? {};
      if (sc.status) return sc;
      if (json.result.isError) return { ok: false, error: sc.error, ...(sc.mayStillRun ? { mayStillRun: true } : {}) };
      return { ok: true, result: sc };
    }
    const res = await fetch(`${base}/v1/calls`, {
      method: 'POST',
      headers: headers(lane),
      body: JSON.stringify({ tool: 'DATA_WRITE_SQL', callId: cid, arguments: args }),
    });
    return (await res.json()) as Envelope;
  };
  const answerOf = (env: Envelope): Answer => {
    const a: Answer = { at: Date.now() };
    if (env.status) a.status = env.status;
    else {
      a.ok = env.ok;
      if (env.ok) a.rowid = Number(env.result?.lastInsertRowid);
      // MCP's structuredContent carries it beside the result's fields.
      const took = env.takenBack ?? env.result?.takenBack;
      if (env.ok && took) a.takenBack = took.undoId;
      else {
        a.code = env.error?.code;
        if (a.code === 'QUOTA_EXCEEDED' || a.code === 'INTERNAL' || a.code === 'IDEMPOTENCY_CONFLICT') a.message = env.error?.message?.slice(0, 300);
      }
      if (env.mayStillRun) a.mayStillRun = true;
    }
    return a;
  };

  for (const lane of LANES) {
    for (;;) {
      const made = await send(lane, `setup-${lane}`, 'CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, cid TEXT NOT NULL, pad TEXT)', []);
      if (made.ok) break;
      await sleep(200);
    }
  }

  const kill = async (which: 'start' | 'worker') => {
    const p = procs[which]!;
    // Already gone by itself: its exit was counted, and its restart waits for this turn.
    if (p.exitCode !== null || p.signalCode !== null) return;
    killing.add(p);
    const gone = new Promise((res) => p.once('exit', res));
    p.kill('SIGKILL');
    await gone;
  };
  const childrenOf = (pid: number): number[] => {
    try {
      return fs
        .readdirSync(`/proc/${pid}/task`)
        .flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    } catch {
      // Gone by itself (counted in unexpectedExits).
      return [];
    }
  };
  const alive = (pid: number) => {
    try {
      return !/^\S+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return false;
    }
  };
  const childrenLeft: { when: string; children: number; left: number[] }[] = [];
  const idleKill = async (when: string) => {
    const p = procs.worker!;
    const kids = childrenOf(p.pid!);
    await kill('worker');
    // Each child hears its parent go (its channel closes; a child that served a request also
    // has its parent watch): none may outlive it by more than a few seconds.
    let left = kids;
    for (let i = 0; i < 50 && left.length; i++) {
      await sleep(100);
      left = left.filter(alive);
    }
    childrenLeft.push({ when, children: kids.length, left });
    for (const k of left) process.kill(k, 'SIGKILL');
    await startProc('worker');
  };
  await sleep(1500);
  await idleKill('before the lanes (every child idle)');

  const writes: Write[] = [];
  let stop = false;
  let seq = 0;
  const lane = async (l: Lane) => {
    while (!stop) {
      const w: Write = { lane: l, cid: `${l}-${++seq}`, sent: Date.now(), answers: [] };
      writes.push(w);
      for (let tries = 0; ; tries++) {
        let a: Answer;
        try {
          a = answerOf(await send(l, w.cid, sqlOf(l), paramsOf(l, w.cid)));
        } catch (err) {
          a = { at: Date.now(), error: String((err as Error).message).slice(0, 120) };
        }
        w.answers.push(a);
        const resend = a.status || a.error || a.mayStillRun || a.code === 'UNAUTHENTICATED' || a.code?.startsWith('JSONRPC');
        if (!resend && !(a.ok === false && RETRYABLE.has(a.code!) && Math.random() < 0.5)) {
          w.outcome = a.ok ? 'ok' : 'failed';
          w.settled = a.at;
          break;
        }
        if (stop && tries > 300) break;
        await sleep(a.ok === false || a.error ? 150 : 20);
      }
    }
  };

  const cliRuns: { label: string; at: number; ms: number; code: number | null; out: string }[] = [];
  const cli = async (label: string, args: string[]) => {
    const t = Date.now();
    const res = await runCli(args, { ...env, LOG_LEVEL: 'silent' });
    const run = { label, at: t, ms: Date.now() - t, code: res.code, out: (res.stdout.trim() || res.stderr.trim()).slice(0, 1500) };
    cliRuns.push(run);
    return run;
  };
  const restores: { lane: Lane; into: string; at: number; fromBlob?: boolean; code: number | null; out: string; started: number; ended: number }[] = [];
  let forks = 0;
  const restoreInto = async (l: Lane, at: number, fromBlob = false) => {
    const into = `r${++forks}`;
    const db = agentOf[l] ? `${WS}/${agentOf[l]}` : WS;
    const args = ['restore', db, '--at', new Date(at).toISOString(), '--into', `${WS}/${into}`, '--json'];
    if (fromBlob) args.splice(2, 0, '--from-blob');
    const run = await cli(`restore ${l}→${into}`, args);
    restores.push({ lane: l, into, at, fromBlob, code: run.code, out: run.out, started: run.at, ended: run.at + run.ms });
  };
  // Session 31, F8: restores in place of lane `place`'s database (during each full disk). One that
  // answered ok takes its database back to its moment: the writes acknowledged after the moment
  // and before its answer may be undone (its undo window); every other acknowledged write is kept.
  // Session 36, F15: one answered "may still run"/"may have run" (its shard op handed to Redis,
  // Redis then lost) that its database's audit shows ran (`ranAt`, its row's time) undoes as one
  // answered ok does, up to a little after it ran (its commit): counted apart (undoneByMayHaveRun).
  const inPlace: { at: number; code: number | null; out: string; started: number; ended: number; duringFull?: boolean; ranAt?: number }[] = [];
  const restoreInPlace = async (at: number) => {
    const run = await cli('restore in place', ['restore', `${WS}/${agentOf.place}`, '--at', new Date(at).toISOString(), '--json']);
    inPlace.push({ at, code: run.code, out: run.out, started: run.at, ended: run.at + run.ms });
  };
  /** Whether `w` (lane place) may be undone by an in-place restore that began by `by`. */
  const undoneBy = (w: Write, by: number) =>
    w.lane === 'place' &&
    inPlace.some((p) => {
      const ended = p.code === 0 ? p.ended : p.ranAt === undefined ? undefined : Math.max(p.ended, p.ranAt + 10_000);
      return ended !== undefined && p.started <= by && w.answers.some((a) => a.ok && a.at > p.at && a.at <= ended);
    });
  const operator = async () => {
    for (let n = 0; !stop; n++) {
      await sleep(rand(1500, 4000));
      if (n % 3 === 2) await cli('backup', ['backup', 'now']);
      // A whole second, one or two behind now: the restore's moment is that second's start.
      else await restoreInto(LANES[n % LANES.length]!, Math.floor(Date.now() / 1000) * 1000 - 1000 * Math.ceil(rand(0, 2)));
    }
  };

  const faults: { fault: string; at: string; ms: number; detail?: string }[] = [];
  const redisStray: { fault: string; at: string; held?: number; answering: number }[] = [];
  /** When the data tmpfs was full (fill to free). */
  const fullSpans: [number, number][] = [];
  let workerKills = 0;
  let filling: { fd: number } | undefined;
  let workerStops = 0;
  const inject = async (f: string, arg?: string) => {
    const t0 = Date.now();
    const at = new Date().toISOString();
    // Its start too: a fault that never ends (run 6 of session 30 stopped its streams) shows which.
    console.error(`${at} ${f} begins`);
    let detail = '';
    // Session 34, F11: at the end of each Redis fault, in its turn, whether the Redis answering
    // is the one the driver holds (F11's run 2: one started during an emptyfull answered to the
    // end while later faults killed and started processes that exited at once, the port taken).
    let stray: { held?: number; answering: number } | undefined;
    const checkRedis = async () => {
      const held = redisProc()?.pid;
      const answering = Number(/process_id:(\d+)/.exec(await r.info('server').catch(() => ''))?.[1] ?? 0);
      if (answering !== held) stray = { held, answering };
    };
    if (f === 'worker' || f === 'child') {
      const which =
        arg === 'worker' || arg === 'start' ? arg : f === 'worker' ? (workerKills++ % 2 ? 'worker' : 'start') : Math.random() < 0.5 ? 'worker' : 'start';
      detail = await inTurn(which, async () => {
        if (f === 'child') {
          const kids = childrenOf(procs[which]!.pid!);
          for (const k of kids) process.kill(k, 'SIGKILL');
          return `${which}: ${kids.length}`;
        }
        await kill(which);
        await sleep(rand(200, 1500));
        await startProc(which);
        return which;
      });
    } else if (f === 'full') {
      const file = path.join(dataDir, `.fill-${t0}`);
      const filled = fillDisk(file);
      filling = filled;
      const hold = arg ? Number(arg) : rand(3000, 8000);
      // A restore while the disk is full: refused STORAGE_FULL, or (room found) every acknowledged row.
      const during = restoreInto(LANES[Math.floor(rand(0, LANES.length))]!, Math.floor(Date.now() / 1000) * 1000 - 1000);
      // Session 31, F8: and one in place; and (ROOM_P of the time, 0.5 by default) a little room
      // given back after a second, as a process gone frees its files, so restores get under way.
      const inPlaceDuring = restoreInPlace(Math.floor(Date.now() / 1000) * 1000 - 1000);
      let room = '';
      if (Math.random() < Number(process.env.ROOM_P ?? 0.5)) {
        await sleep(1000);
        const kb = Math.round(rand(2000, 8000));
        fs.ftruncateSync(filled.fd, Math.max(0, fs.fstatSync(filled.fd).size - kb * 1024));
        room = `, ${kb} KiB given back`;
      }
      await sleep(hold);
      filling = undefined;
      fs.ftruncateSync(filled.fd, 0);
      fs.closeSync(filled.fd);
      fs.rmSync(file);
      fullSpans.push([t0, Date.now()]);
      await during;
      await inPlaceDuring;
      detail = `${Math.round(hold)} ms${room}`;
    } else if (f === 'room') {
      // Session 30, G8: during a full disk, arg KiB given back (a process gone frees its files), as run 3's kill of `start` did.
      if (filling) fs.ftruncateSync(filling.fd, Math.max(0, fs.fstatSync(filling.fd).size - Number(arg ?? 4096) * 1024));
      detail = filling ? `${arg ?? 4096} KiB` : 'no full disk';
    } else if (f === 'idle') {
      await inTurn('worker', () => idleKill(at));
      const last = childrenLeft.at(-1)!;
      detail = `children ${last.children}, left ${last.left.length}`;
    } else if (f === 'stopw') {
      const which = arg === 'worker' || arg === 'start' ? arg : workerStops++ % 2 ? 'worker' : 'start';
      await inTurn(which, async () => {
        procs[which]!.kill('SIGSTOP');
        await sleep(10_000);
        procs[which]!.kill('SIGCONT');
      });
      detail = which;
    } else if (f === 'stopr') {
      await inTurn('redis', async () => {
        redis.signal('SIGSTOP');
        await sleep(10_000);
        redis.signal('SIGCONT');
      });
    } else if (f === 'misconf' || f === 'misconfe') {
      detail = await inTurn('redis', async () => {
        // misconfe: under appendfsync everysec Redis refuses writes (MISCONF) instead of exiting.
        if (f === 'misconfe') await r.config('SET', 'appendfsync', 'everysec');
        const file = path.join(redis.dir, `.fill-${t0}`);
        const filled = fillDisk(file);
        const hold = arg ? Number(arg) : rand(3000, 8000);
        await sleep(hold);
        fs.ftruncateSync(filled.fd, 0);
        fs.closeSync(filled.fd);
        fs.rmSync(file);
        const p = redisProc();
        const exited = !p || p.exitCode !== null || p.signalCode !== null;
        if (exited) await redis.start();
        else if (f === 'misconfe') {
          // Redis takes writes again once a write of its AOF works (it retries each second).
          for (let i = 0; i < 100; i++) {
            const info = await r.info('persistence').catch(() => '');
            if (/aof_last_write_status:ok/.test(info)) break;
            await sleep(100);
          }
          await r.config('SET', 'appendfsync', 'always').catch(() => undefined);
        }
        await checkRedis();
        return `${Math.round(hold)} ms${exited ? `, Redis exited (${p?.exitCode ?? p?.signalCode}), started from its AOF` : ''}`;
      });
    } else if (f === 'emptyfull') {
      // Session 33, F10: Redis SIGKILLed and started again EMPTY on its own full disk (its AOF
      // cannot be written: under appendfsync always it exits at its first write), the disk freed
      // after 3-8 s, Redis started again if it exited, and the registry put back then.
      detail = await inTurn('redis', async () => {
        await redis.kill();
        redis.wipe();
        const file = path.join(redis.dir, `.fill-${t0}`);
        const filled = fillDisk(file);
        // Its start waits until it answers: one that exits at once on the full disk never does.
        const up = await Promise.race([redis.start().then(() => 'answered'), sleep(5000).then(() => 'did not answer')]);
        const startedOnFull = redisProc()?.pid;
        const hold = arg ? Number(arg) : rand(3000, 8000);
        await sleep(hold);
        fs.ftruncateSync(filled.fd, 0);
        fs.closeSync(filled.fd);
        fs.rmSync(file);
        const p = redisProc();
        const exited = !p || p.exitCode !== null || p.signalCode !== null;
        const how = `pid ${p?.pid} ${exited ? `exited ${p?.exitCode ?? p?.signalCode}` : 'alive'} (started on the full disk: ${startedOnFull})`;
        if (exited) await redis.start();
        // A Redis whose AOF write failed answers MISCONF until a write works again: put back
        // once it does (run 2 of F11's driver died of the MISCONF here).
        for (const [k, v] of registry)
          for (let tries = 0; ; tries++) {
            const put = await r.restore(k, 0, v, 'REPLACE').then(
              () => true,
              (err) => (tries < 100 ? false : Promise.reject(err)),
            );
            if (put) break;
            await sleep(100);
          }
        await checkRedis();
        return `${Math.round(hold)} ms, empty on the full disk: ${up}${exited ? ', exited, started again' : ''}; ${how}, then pid ${redisProc()?.pid}`;
      });
    } else if (f === 'aof' || f === 'empty') {
      await inTurn('redis', async () => {
        await redis.kill();
        if (f === 'empty') redis.wipe();
        await sleep(rand(300, 2000));
        await redis.start();
        if (f === 'empty') for (const [k, v] of registry) await r.restore(k, 0, v, 'REPLACE');
        await checkRedis();
      });
    }
    if (stray) {
      redisStray.push({ fault: f, at, ...stray });
      detail += ` (Redis answering is pid ${stray.answering}, the driver holds ${stray.held})`;
    }
    faults.push({ fault: f, at, ms: Date.now() - t0, detail });
    console.error(`${at} ${f} ${detail}`);
  };
  const plan = Array.from({ length: ROUNDS }, () => KINDS)
    .flat()
    .sort(() => Math.random() - 0.5);
  // Session 30, G8: PLAN="ms:kind[:arg],..." runs those faults at those offsets from the lanes'
  // start, each in its own turn (arg: `worker`/`start` for worker, child, stopw; the hold in ms
  // for full, misconf, misconfe), instead of the shuffled rounds; DENSE=lane restores that lane
  // at the end to every whole second from the first fault to the last one's end.
  const scripted = (process.env.PLAN ?? '')
    .split(',')
    .filter(Boolean)
    .map((x) => x.split(':'))
    .map(([ms, kind, arg]) => ({ ms: Number(ms), kind: kind!, arg }));
  const lanesFrom = Date.now();
  const faulting = scripted.length
    ? Promise.all(
        scripted.map(async ({ ms, kind, arg }) => {
          await sleep(Math.max(0, lanesFrom + ms - Date.now()));
          await inject(kind, arg);
        }),
      )
    : Promise.all(
        Array.from({ length: STREAMS }, async (_, i) => {
          const mine = i === 0 ? plan : [...plan].sort(() => Math.random() - 0.5);
          const gap = RUN_MS / (mine.length + 1);
          for (const f of mine) {
            await sleep(rand(0.5 * gap, 1.5 * gap));
            await inject(f);
          }
        }),
      );

  const running = [...LANES.map(lane), ...LANES.map(lane), operator()];
  const progress = setInterval(
    () => console.error(`${new Date().toISOString()} writes ${writes.length}, open ${writes.filter((w) => !w.outcome).length}`),
    10_000,
  );
  await faulting;
  await sleep(scripted.length ? 5000 : RUN_MS / (plan.length + 1));
  stop = true;
  await Promise.all(running);
  clearInterval(progress);
  stopping = true;
  // The run's restores may have filled the data tmpfs: room for the end's restores and reads.
  growTmpfs(dataDir, process.env.END_DATA_SIZE ?? '3g');
  await cli('backup end', ['backup', 'now']);
  const end = Date.now();
  for (const l of LANES) await restoreInto(l, end, true);
  // Each fault's end, to the next whole second, restored (lanes in turn): what was acknowledged
  // across it must be there.
  for (const [i, f] of faults.entries()) await restoreInto(LANES[i % LANES.length]!, Math.ceil((Date.parse(f.at) + f.ms) / 1000) * 1000);
  const dense = process.env.DENSE as Lane | undefined;
  if (dense && faults.length) {
    const from = Math.floor(Math.min(...faults.map((f) => Date.parse(f.at))) / 1000) * 1000;
    const to = Math.max(...faults.map((f) => Date.parse(f.at) + f.ms)) + 3000;
    for (let t = from; t <= to; t += 1000) await restoreInto(dense, t);
  }

  fs.writeFileSync(path.join(out, 'writes.json'), JSON.stringify(writes));
  const unreadable: string[] = [];
  const rowsOf = (db: string | undefined) => {
    const id = db ? `${WS}/${db}` : WS;
    const file = databasePath(dataDir, WS, db, shardOf(id, config.shardCount));
    if (!fs.existsSync(file)) return undefined;
    try {
      const d = new Database(file, { readonly: true });
      try {
        return d.prepare('SELECT id, cid FROM t').all() as { id: number; cid: string }[];
      } finally {
        d.close();
      }
    } catch (err) {
      unreadable.push(`${id}: ${String(err)}`);
      return undefined;
    }
  };
  const idsIn = (db: string | undefined) => {
    const m = new Map<string, number[]>();
    for (const row of rowsOf(db) ?? []) m.set(row.cid, [...(m.get(row.cid) ?? []), row.id]);
    return m;
  };
  const holes = {
    missing: [] as string[],
    doubled: [] as string[],
    wrongRowid: [] as string[],
    refusedPresent: [] as string[],
    failedAnswerButPresent: [] as string[],
    /** Refused UNAVAILABLE "not sent" after an earlier send of the id answered that it may run, and there: see the header. */
    notSentAfterMayRun: [] as string[],
    /** An ok answer, then (in the run or at the end's resend) a refusal without mayStillRun: "nothing ran". */
    okThenNotRun: [] as string[],
    disagree: [] as string[],
    noOutcome: [] as string[],
    resendDiffers: [] as string[],
    /** A write in its database whose answer says a restore took it back (session 38, F19). */
    falseTakenBack: [] as string[],
  };
  // The last answer says this send never reached Redis (UNAVAILABLE, mayStillRun false), but an
  // earlier send of the id was answered may still run, queued, or not at all: that one may have run.
  const notSentAfterMayRun = (w: Write) => w.answers.at(-1)?.code === 'UNAVAILABLE' && w.answers.slice(0, -1).some((a) => a.mayStillRun || a.status || a.error);
  const undone: string[] = [];
  const toldTakenBack: string[] = [];
  // Which in-place restores answered "may … run" ran after all: an audit row of a restore of its
  // database (`at`: when it ran) that no restore answered ok made, from its start to a minute on.
  {
    const file = databasePath(dataDir, WS, agentOf.place, shardOf(`${WS}/${agentOf.place}`, config.shardCount));
    const okIds = new Set(inPlace.filter((p) => p.code === 0).map((p) => `restore:${(JSON.parse(p.out) as { undoId?: string }).undoId}`));
    let audited: { approval_id: string; at: number }[] = [];
    try {
      const d = new Database(file, { readonly: true });
      try {
        audited = d.prepare(`SELECT approval_id, at FROM ${AUDIT_TABLE} WHERE approval_id LIKE 'restore:%'`).all() as typeof audited;
      } finally {
        d.close();
      }
    } catch {
      // No audit table: no restore of it ran.
    }
    for (const p of inPlace) {
      if (p.code === 0 || !/may (still run|have run)|may have run it already/.test(p.out)) continue;
      p.ranAt = audited.find((row) => !okIds.has(row.approval_id) && row.at >= p.started && row.at <= p.started + 60_000)?.at;
    }
  }
  const live = () => Object.fromEntries(LANES.map((l) => [l, idsIn(agentOf[l])]));
  const check = (ids: Record<string, Map<string, number[]>>) => {
    for (const w of writes) {
      const got = ids[w.lane]!.get(w.cid) ?? [];
      if (got.length > 1) holes.doubled.push(w.cid);
      if (!w.outcome) {
        holes.noOutcome.push(`${w.cid} ${JSON.stringify(w.answers.at(-1))}`);
        continue;
      }
      const oks = w.answers.filter((a) => a.ok === true);
      const firstOk = w.answers.findIndex((a) => a.ok === true);
      if (firstOk >= 0 && w.answers.slice(firstOk).some((a) => a.ok === false && !a.mayStillRun))
        holes.okThenNotRun.push(`${w.cid} ${w.answers.map((a) => a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>')}`);
      if (new Set(oks.map((a) => a.rowid)).size > 1) holes.disagree.push(w.cid);
      if (w.outcome === 'ok' && got.length === 0) {
        // Its last answer said which restore took it back (a late ok): told truthfully.
        if (w.answers.filter((a) => a.ok).at(-1)?.takenBack) toldTakenBack.push(w.cid);
        else if (undoneBy(w, Number.POSITIVE_INFINITY)) undone.push(w.cid);
        else holes.missing.push(w.cid);
      }
      if (w.outcome === 'ok' && got.length === 1 && got[0] !== oks.at(-1)!.rowid) holes.wrongRowid.push(w.cid);
      if (got.length === 1 && oks.at(-1)?.takenBack) holes.falseTakenBack.push(`${w.cid} ${oks.at(-1)!.takenBack}`);
      if (w.outcome === 'failed' && got.length && notSentAfterMayRun(w)) {
        holes.notSentAfterMayRun.push(`${w.cid} ${w.answers.map((a) => a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>')}`);
        continue;
      }
      if (w.outcome === 'failed' && got.length) holes.refusedPresent.push(`${w.cid} ${w.answers.at(-1)!.code}`);
      // A failure without mayStillRun says the write had not happened: a write found there later must have an ok after it.
      let lastFail = -1;
      w.answers.forEach((a, i) => {
        if (a.ok === false && !a.mayStillRun && a.code !== 'UNAUTHENTICATED') lastFail = i;
      });
      if (got.length && lastFail >= 0 && !w.answers.slice(lastFail).some((a) => a.ok))
        holes.failedAnswerButPresent.push(`${w.cid} ${w.answers.map((a) => a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>')}`);
    }
  };
  check(live());
  // Every acknowledged write sent again under its id: its first outcome, nothing run again.
  const acked = writes.filter((w) => w.outcome === 'ok');
  let resent = 0;
  const resends: unknown[] = [];
  for (const w of acked) {
    // Taken back by a restore in place: sent again, it answers its ok with the restore that took it
    // back (session 38, F19), or runs again when its result has gone with an empty Redis.
    if (undoneBy(w, Number.POSITIVE_INFINITY) || toldTakenBack.includes(w.cid)) continue;
    const a = answerOf(await send(w.lane, w.cid, sqlOf(w.lane), paramsOf(w.lane, w.cid)).catch((e) => ({ ok: false, error: { code: String(e) } })));
    resent++;
    resends.push({ cid: w.cid, ...a });
    const first = w.answers.find((x) => x.ok)!;
    if (a.ok === false && !a.mayStillRun) holes.okThenNotRun.push(`${w.cid} at the end: ${a.code}`);
    if (a.takenBack) holes.falseTakenBack.push(`${w.cid} ${a.takenBack}`);
    if (a.ok !== true || a.rowid !== first.rowid) holes.resendDiffers.push(`${w.cid} ${JSON.stringify(a)} first ${first.rowid}`);
  }
  const after = live();
  // The budget's sum against its ledger: a let-go that drifted shows as a difference.
  const budgetKeys = keys.redisBudget(WS);
  const ledger = await r.zrange(budgetKeys.ledger, 0, -1, 'WITHSCORES');
  let ledgerSum = 0;
  const byKind: Record<string, { entries: number; bytes: number; pastNow: number }> = {};
  for (let i = 0; i < ledger.length; i += 2) {
    const m = /\|([^|:]+):(\d+)$/.exec(ledger[i]!);
    const bytes = Number(m?.[2] ?? 0);
    ledgerSum += bytes;
    const k = (byKind[m?.[1] ?? '?'] ??= { entries: 0, bytes: 0, pastNow: 0 });
    k.entries++;
    k.bytes += bytes;
    if (Number(ledger[i + 1]) <= Date.now()) k.pastNow++;
  }
  const budget = { held: Number((await r.get(budgetKeys.held)) ?? 0), ledgerSum, byKind };
  const doubledAfterResend = writes.filter((w) => (after[w.lane]!.get(w.cid)?.length ?? 0) > 1).map((w) => w.cid);

  const restoreChecks = restores.map((rs): Record<string, unknown> => {
    const duringFull = fullSpans.some(([a, b]) => rs.started < b && rs.ended > a);
    const row: Record<string, unknown> = { lane: rs.lane, into: rs.into, at: new Date(rs.at).toISOString(), fromBlob: rs.fromBlob, exit: rs.code, duringFull };
    if (rs.code !== 0) return { ...row, answered: rs.out.slice(0, 200) };
    const ids = idsIn(rs.into);
    const moment = rs.fromBlob ? Date.parse((JSON.parse(rs.out) as { restoredTo: string }).restoredTo) : rs.at;
    const mine = writes.filter((w) => w.lane === rs.lane);
    const missing = mine.filter((w) => w.outcome === 'ok' && w.answers.find((a) => a.ok)!.at <= moment && !ids.has(w.cid) && !undoneBy(w, moment));
    return {
      ...row,
      ...(rs.fromBlob ? { restoredTo: new Date(moment).toISOString() } : {}),
      rows: ids.size,
      ackedByMoment: mine.filter((w) => w.outcome === 'ok' && w.answers.find((a) => a.ok)!.at <= moment).length,
      missing: missing.map((w) => w.cid).slice(0, 10),
      sentAfterPresent: mine
        .filter((w) => w.sent > moment && ids.has(w.cid))
        .map((w) => w.cid)
        .slice(0, 10),
      refusedPresent: mine
        .filter((w) => w.outcome === 'failed' && ids.has(w.cid) && !notSentAfterMayRun(w))
        .map((w) => w.cid)
        .slice(0, 10),
      doubled: [...ids].filter(([, v]) => v.length > 1).length,
    };
  });
  const codes: Record<string, number> = {};
  for (const w of writes)
    for (const a of w.answers)
      if (!a.ok) {
        const k = `${w.lane} ${a.code ?? a.status ?? 'transport'}${a.mayStillRun ? ' mayStillRun' : ''}`;
        codes[k] = (codes[k] ?? 0) + 1;
      }
  const report = {
    out,
    faults,
    writes: writes.length,
    byLane: Object.fromEntries(
      LANES.map((l) => {
        const mine = writes.filter((w) => w.lane === l);
        return [
          l,
          {
            writes: mine.length,
            ok: mine.filter((w) => w.outcome === 'ok').length,
            refused: mine.filter((w) => w.outcome === 'failed').length,
            resent: mine.filter((w) => w.answers.length > 1).length,
          },
        ];
      }),
    ),
    answersNotOk: codes,
    holes: Object.fromEntries(Object.entries(holes).map(([k, v]) => [k, { count: v.length, some: v.slice(0, 8) }])),
    resentAtEnd: resent,
    inPlace: {
      ok: inPlace.filter((p) => p.code === 0).length,
      duringFullOk: inPlace.filter((p) => p.code === 0 && fullSpans.some(([a, b]) => p.started < b && p.ended > a)).length,
      refused: inPlace.filter((p) => p.code !== 0).map((p) => `exit ${p.code} ${p.out.slice(0, 160)}`),
      undoneWrites: undone.length,
      toldTakenBack: toldTakenBack.length,
      lateOksTakenBack: writes
        .filter((w) => w.answers.some((a) => a.takenBack))
        .map((w) => `${w.cid} ${w.answers.map((a) => a.takenBack ?? a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>')}`),
      undoneByMayHaveRun: undone.filter((cid) => {
        const w = writes.find((x) => x.cid === cid)!;
        return !inPlace.some((p) => p.code === 0 && w.answers.some((a) => a.ok && a.at > p.at && a.at <= p.ended));
      }).length,
      ranAfterMayRun: inPlace.filter((p) => p.ranAt !== undefined).map((p) => ({ at: new Date(p.at).toISOString(), ranAt: new Date(p.ranAt!).toISOString() })),
    },
    budget,
    childrenLeft,
    redisStray,
    restartsRefused,
    unexpectedExits,
    unreadable,
    doubledAfterResend,
    restores: {
      ok: restoreChecks.filter((x) => x.exit === 0).length,
      refused: restoreChecks.filter((x) => x.exit !== 0).map((x) => `${x.at} ${String(x.answered).slice(0, 100)}`),
      withHoles: restoreChecks.filter(
        (x) => (x.exit === 0 && [x.missing, x.sentAfterPresent, x.refusedPresent].some((v) => (v as string[]).length)) || Number(x.doubled) > 0,
      ),
      acksChecked: restoreChecks.reduce((n, x) => n + Number(x.ackedByMoment ?? 0), 0),
      duringFull: {
        ok: restoreChecks.filter((x) => x.duringFull && x.exit === 0).length,
        acksChecked: restoreChecks.filter((x) => x.duringFull).reduce((n, x) => n + Number(x.ackedByMoment ?? 0), 0),
        refused: restoreChecks.filter((x) => x.duringFull && x.exit !== 0).map((x) => `exit ${x.exit} ${String(x.answered).slice(0, 160)}`),
      },
    },
    cliRefusals: Object.entries(
      cliRuns
        .filter((c) => c.code !== 0)
        .reduce<Record<string, number>>((m, c) => {
          const k = `${c.label.split(' ')[0]} exit ${c.code}: ${c.out.split('\n')[0]!.slice(0, 140)}`;
          m[k] = (m[k] ?? 0) + 1;
          return m;
        }, {}),
    ),
    backups: cliRuns.filter((c) => c.label.startsWith('backup')).map((c) => `${new Date(c.at).toISOString()} exit ${c.code} ${c.out.slice(0, 80)}`),
  };
  fs.writeFileSync(path.join(out, 'writes.json'), JSON.stringify(writes));
  fs.writeFileSync(path.join(out, 'resends.json'), JSON.stringify(resends));
  fs.writeFileSync(path.join(out, 'restores.json'), JSON.stringify(restoreChecks, null, 1));
  fs.writeFileSync(path.join(out, 'in-place.json'), JSON.stringify(inPlace, null, 1));
  fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(report, null, 1));
  console.log(JSON.stringify(report, null, 1));
  await client.close();
  r.disconnect();
}

async function cleanup(): Promise<void> {
  for (const p of Object.values(procs))
    if (p && p.exitCode === null && p.signalCode === null) {
      const gone = new Promise((res) => p.once('exit', res));
      p.kill('SIGTERM');
      await Promise.race([gone, sleep(10_000)]);
      p.kill('SIGKILL');
    }
  // Its folder is a mount point: stopped, unmounted below, then removed.
  await ownRedis?.stop();
  for (const dir of mounts.reverse()) {
    try {
      unmountTmpfs(dir);
    } catch (err) {
      console.error(`could not unmount ${dir}: ${String(err)}`);
    }
  }
  fs.rmSync(root, { recursive: true, force: true });
  if (ownRedis) fs.rmSync(ownRedis.dir, { recursive: true, force: true });
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(cleanup)
  .finally(() => process.exit());
