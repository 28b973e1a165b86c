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
// Session 38, F20 added HISTORY_SIZE (e.g. 256m): history on a tmpfs of its own in the data folder.
//
// Root only (mount). `npm run build`, then
//   RUN_S=120 FAULT_ROUNDS=2 [FAULT_STREAMS=2] node --import tsx bench/faults-ledger-29.ts
// FAULT_STREAMS=2 runs the plan twice at once, in two orders, so faults overlap (one per resource at a time).
// Prints a JSON report; $OUT (a temp folder) keeps it, the answers and the processes' logs.
//
// Its parts, in bench/faults-ledger/: lanes.ts (the writers), supervisor.ts (the processes),
// operator.ts (restores and backups by the CLI), faults.ts (each fault), checks.ts, report.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { MemberRegistry } from '../src/registry/members.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { freePort, OwnRedis } from '../test/helpers/own-redis.ts';
import { growTmpfs, mountTmpfs, unmountTmpfs } from '../test/helpers/tmpfs.ts';
import { checkLedger } from './faults-ledger/checks.ts';
import { Faults } from './faults-ledger/faults.ts';
import { agentOf, type Lane, LANES, makeTables, rand, runLane, sender, sleep, WS, type Writers } from './faults-ledger/lanes.ts';
import { Operator } from './faults-ledger/operator.ts';
import { reportOf } from './faults-ledger/report.ts';
import { Supervisor } from './faults-ledger/supervisor.ts';

const RUN_MS = Number(process.env.RUN_S ?? 120) * 1000;
const ROUNDS = Number(process.env.FAULT_ROUNDS ?? 2);
const STREAMS = Number(process.env.FAULT_STREAMS ?? 1);
const KINDS = (process.env.FAULTS ?? 'worker,child,full,empty,aof,idle,stopw,stopr,misconf,misconfe').split(',').filter(Boolean);

const out = process.env.OUT ?? fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-f4-'));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-f4-mnt-'));
const dataDir = path.join(root, 'data');
const blobDir = path.join(root, 'blobs');
const mounts: string[] = [];
let supervisor: Supervisor | undefined;
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
  // HISTORY_SIZE: history on a tmpfs of its own inside the data folder (its renames cross devices;
  // the data faults fill the data disk only, history's fills on its own as writes outrun it).
  if (process.env.HISTORY_SIZE) mount(path.join(dataDir, 'history'), process.env.HISTORY_SIZE);
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

  const procs = new Supervisor(env, fs.createWriteStream(path.join(out, 'processes.log')));
  supervisor = procs;
  await procs.start('start');
  await procs.start('worker');
  const client = new AgentDbClient({ redisUrl: redis.url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: false });
  const send = sender(client, `http://127.0.0.1:${port}`, key);
  await makeTables(send);
  await sleep(1500);
  await procs.idleKill('before the lanes (every child idle)');

  const writers: Writers = { writes: [], stop: false, seq: 0 };
  const { writes } = writers;
  const operator = new Operator(env);
  const faults = new Faults(redis, r, registry, procs, operator, dataDir);
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
          await faults.inject(kind, arg);
        }),
      )
    : Promise.all(
        Array.from({ length: STREAMS }, async (_, i) => {
          const mine = i === 0 ? plan : [...plan].sort(() => Math.random() - 0.5);
          const gap = RUN_MS / (mine.length + 1);
          for (const f of mine) {
            await sleep(rand(0.5 * gap, 1.5 * gap));
            await faults.inject(f);
          }
        }),
      );

  const lane = (l: Lane) => runLane(send, writers, l);
  const running = [...LANES.map(lane), ...LANES.map(lane), operator.loop(() => writers.stop)];
  const progress = setInterval(
    () => console.error(`${new Date().toISOString()} writes ${writes.length}, open ${writes.filter((w) => !w.outcome).length}`),
    10_000,
  );
  await faulting;
  await sleep(scripted.length ? 5000 : RUN_MS / (plan.length + 1));
  writers.stop = true;
  await Promise.all(running);
  clearInterval(progress);
  procs.stopping = true;
  // The run's restores may have filled the data tmpfs: room for the end's restores and reads.
  growTmpfs(dataDir, process.env.END_DATA_SIZE ?? '3g');
  if (process.env.HISTORY_SIZE) growTmpfs(path.join(dataDir, 'history'), process.env.END_DATA_SIZE ?? '3g');
  await operator.cli('backup end', ['backup', 'now']);
  const end = Date.now();
  for (const l of LANES) await operator.restoreInto(l, end, true);
  // Each fault's end, to the next whole second, restored (lanes in turn): what was acknowledged
  // across it must be there.
  for (const [i, f] of faults.faults.entries()) await operator.restoreInto(LANES[i % LANES.length]!, Math.ceil((Date.parse(f.at) + f.ms) / 1000) * 1000);
  const dense = process.env.DENSE as Lane | undefined;
  if (dense && faults.faults.length) {
    const from = Math.floor(Math.min(...faults.faults.map((f) => Date.parse(f.at))) / 1000) * 1000;
    const to = Math.max(...faults.faults.map((f) => Date.parse(f.at) + f.ms)) + 3000;
    for (let t = from; t <= to; t += 1000) await operator.restoreInto(dense, t);
  }

  fs.writeFileSync(path.join(out, 'writes.json'), JSON.stringify(writes));
  const checked = await checkLedger({ writes, operator, fullSpans: faults.fullSpans, dataDir, shardCount: config.shardCount, send, r, keys });
  const report = reportOf(out, writes, checked, faults, procs, operator);
  fs.writeFileSync(path.join(out, 'writes.json'), JSON.stringify(writes));
  fs.writeFileSync(path.join(out, 'resends.json'), JSON.stringify(checked.resends));
  fs.writeFileSync(path.join(out, 'restores.json'), JSON.stringify(checked.restoreChecks, null, 1));
  fs.writeFileSync(path.join(out, 'in-place.json'), JSON.stringify(operator.inPlace, null, 1));
  fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(report, null, 1));
  console.log(JSON.stringify(report, null, 1));
  await client.close();
  r.disconnect();
}

async function cleanup(): Promise<void> {
  await supervisor?.stopAll();
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
