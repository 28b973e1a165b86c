// Approvals under faults, with a ledger of every acknowledged decision and every call's final
// answer (session 34, D1).
//
// A redis-server of its own (AOF, `appendfsync` from FSYNC: always or everysec), two `agentdb
// worker` processes (this checkout's build), and a runtime in this process that parks writes of an
// agent with `approval: write` under its own call ids. Each parked write is decided by a person
// through `agentdb approvals approve|reject --operator --by ada --json` (a process of its own, as
// the API's would be), which the run SIGKILLs at a random moment in KILL_DECIDER of the cases,
// then sends again unkilled, as a person whose page timed out would. Faults in between, per FAULTS:
//   worker  SIGKILL of one worker, started again
//   aof     Redis SIGKILLed and started again from its AOF
// Every call's end is awaited (WAIT_S at most, then it counts as stuck), resent under its id when
// its answer says it may still run or Redis was away. Checked against the database file: a call
// approved (acknowledged) ran once, its answer ok; a rejected one never ran, answered
// APPROVAL_REJECTED; the approval record still holds the decision acknowledged; none stuck.
//   npm run build && FSYNC=everysec CALLS=60 FAULTS=worker,aof node --import tsx bench/approval-faults-ledger.ts
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { ApprovalStore } from '../src/approvals/approval-store.ts';
import type { AwaitingAnswer } from '../src/calls/call-answers.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { loadConfig } from '../src/config.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { keysFor } from '../src/redis/keys.ts';
import { MemberRegistry } from '../src/registry/members.ts';
import { freePort } from '../test/helpers/own-redis.ts';
import { CLI, startCli } from '../test/helpers/processes.ts';

const CALLS = Number(process.env.CALLS ?? 60);
const FSYNC = process.env.FSYNC ?? 'everysec';
const FAULTS = (process.env.FAULTS ?? 'worker,aof').split(',').filter(Boolean);
const KILL_DECIDER = Number(process.env.KILL_DECIDER ?? 0.5);
const WAIT_MS = Number(process.env.WAIT_S ?? 40) * 1000;
const WS = 'd1';
const who = { workspace: WS, agent: 'scout', settings: { database: 'agent' as const, approval: 'write' as const } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'D1-approval-faults-'));
const dataDir = path.join(out, 'data');
const redisDir = path.join(out, 'redis');
fs.mkdirSync(redisDir);
const workers: ChildProcess[] = [];
let redisProc: ChildProcess | undefined;
let port = 0;

async function startRedis(): Promise<void> {
  redisProc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', redisDir, '--appendonly', 'yes', '--appendfsync', FSYNC, '--save', ''],
    { stdio: 'ignore' },
  );
  for (;;) {
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      if ((await probe.info('persistence')).includes('loading:0')) return;
    } catch {
      // not up yet
    } finally {
      probe.disconnect();
    }
    await sleep(50);
  }
}

async function killRedis(): Promise<void> {
  const p = redisProc;
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  const gone = new Promise((r) => p.once('exit', r));
  p.kill('SIGKILL');
  await gone;
}

/** One decision as a person's process makes it: its exit, what it printed, and whether it was killed. */
function decide(id: string, decision: 'approve' | 'reject', env: Record<string, string>, killAfterMs?: number) {
  return new Promise<{ code: number | null; stdout: string; killed: boolean }>((resolve) => {
    const child = spawn(process.execPath, [...CLI, 'approvals', decision, id, '--operator', '--by', 'ada', '--json', '--reason', 'd1'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.resume();
    let killed = false;
    const timer = killAfterMs === undefined ? undefined : setTimeout(() => ((killed = true), child.kill('SIGKILL')), killAfterMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, killed: killed && code === null });
    });
  });
}

interface Case {
  i: number;
  callId: string;
  approvalId: string;
  decision: 'approve' | 'reject';
  /** The decision as acknowledged to the person: their own, or the one a retry was told stood. */
  acked?: 'approved' | 'rejected';
  deciderKilled: boolean;
  /** The killed decider had recorded the decision: the retry was told it stood (APPROVAL_CONFLICT). */
  recordedByKilled?: boolean;
  answers: string[];
  end?: string;
}

async function main(): Promise<void> {
  port = await freePort();
  await startRedis();
  const url = `redis://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    REDIS_URL: url,
    AGENTDB_PREFIX: WS,
    AGENTDB_DATA_DIR: dataDir,
    SHARD_COUNT: '2',
    EXECUTOR_POOL_SIZE: '1',
    RATE_LIMITS: 'off',
    LEASE_TTL_MS: '2000',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '2000',
    DECISION_WAKE_AFTER_MS: '2000',
    LOG_LEVEL: 'info',
  };
  const config = loadConfig(env);
  const keys = keysFor(config.prefix);
  const r = new Redis(url, { maxRetriesPerRequest: null });
  r.on('error', () => undefined);
  await new MemberRegistry(r, keys).add(WS, 'ada', 'admin');

  const logs = fs.createWriteStream(path.join(out, 'workers.log'));
  const startWorker = async (i: number) => {
    const w = await startCli(['worker'], env);
    w.stdout!.pipe(logs);
    w.stderr!.pipe(logs);
    w.removeAllListeners('exit');
    workers[i] = w;
  };
  await startWorker(0);
  await startWorker(1);

  const client = new AgentDbClient({ redisUrl: url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: false });
  const plain = { ...who, settings: { database: 'agent' as const } };
  const made = await client.call({ ...plain, callId: 'setup', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (cid TEXT NOT NULL)' } });
  if (!made.ok) throw new Error(`setup: ${JSON.stringify(made)}`);

  const cases: Case[] = [];
  const faults: string[] = [];
  const t0 = Date.now();
  for (let i = 0; i < CALLS; i++) {
    const callId = `c${i}`;
    const call = { ...who, callId, tool: 'DATA_WRITE_SQL' as const, arguments: { sql: 'INSERT INTO t (cid) VALUES (?)', params: [callId] } };
    let parked: AwaitingAnswer | undefined;
    for (let tries = 0; !parked && tries < 50; tries++) {
      const a = await client.call(call, { wait: false, timeoutMs: 3000 }).catch((e: Error) => ({ error: e.message }));
      if ('status' in a && a.status === 'awaiting_approval') parked = a;
      else await sleep(200);
    }
    if (!parked) throw new Error(`${callId} never parked`);
    const c: Case = { i, callId, approvalId: parked.approval.id, decision: Math.random() < 0.7 ? 'approve' : 'reject', deciderKilled: false, answers: [] };
    cases.push(c);
    const kill = Math.random() < KILL_DECIDER ? 150 + Math.floor(Math.random() * 500) : undefined;
    for (let attempt = 0; attempt < 20 && !c.acked; attempt++) {
      const d = await decide(c.approvalId, c.decision, env, attempt === 0 ? kill : undefined);
      if (d.killed) {
        c.deciderKilled = true;
        continue;
      }
      if (d.code === 0) c.acked = c.decision === 'approve' ? 'approved' : 'rejected';
      else {
        const conflict = /already (approved|rejected)/.exec(d.stdout);
        if (conflict) {
          c.acked = conflict[1] as 'approved' | 'rejected';
          c.recordedByKilled = c.deciderKilled;
        } else await sleep(300);
      }
    }
    if (process.env.VERBOSE) console.error(`${callId} decided ${c.acked} killed ${c.deciderKilled}`);
    // A fault now and then, between decisions and runs.
    if (FAULTS.length && i % 7 === 3) {
      const f = FAULTS[((i / 7) | 0) % FAULTS.length]!;
      faults.push(`${f}@${i}`);
      if (f === 'worker') {
        const w = workers[0]!;
        const gone = new Promise((res) => w.once('exit', res));
        w.kill('SIGKILL');
        await gone;
        await startWorker(0);
      } else if (f === 'aof') {
        await killRedis();
        await startRedis();
      }
    }
  }

  if (process.env.VERBOSE) console.error('all decided; awaiting ends');
  // Every call's end, resent under its id when its answer says it may still run.
  await Promise.all(
    cases.map(async (c) => {
      const deadline = Date.now() + WAIT_MS;
      while (Date.now() < deadline) {
        const left = deadline - Date.now();
        // result() with wait answers only once the call ends (a parked call: however long that takes).
        const ac = new AbortController();
        const timer = setTimeout(() => ac.abort(new Error('gave up')), Math.min(left, 10_000));
        const a = await client
          .result(c.callId, { workspace: WS, agent: 'scout', wait: true, signal: ac.signal })
          .catch((e: Error) => ({
            ok: false as const,
            status: e.message === 'gave up' ? 'still waiting' : undefined,
            error: { code: `THREW ${e.message.slice(0, 40)}` },
          }))
          .finally(() => clearTimeout(timer));
        const tag = 'status' in a && a.status ? a.status : a.ok ? 'ok' : (a as { error: { code: string } }).error.code;
        c.answers.push(tag);
        if (tag === 'ok' || tag === 'APPROVAL_REJECTED' || tag === 'APPROVAL_EXPIRED') {
          c.end = tag;
          return;
        }
        if ('mayStillRun' in a || tag === 'UNAVAILABLE' || tag === 'NOT_FOUND') {
          const again = await client
            .call(
              { ...who, callId: c.callId, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (cid) VALUES (?)', params: [c.callId] } },
              { wait: false },
            )
            .catch(() => undefined);
          if (again && 'status' in again && again.status) c.answers.push(`resent:${again.status}`);
        }
      }
    }),
  );

  const store = new ApprovalStore(r, keys);
  const dbFile = databasePath(dataDir, WS, 'scout', shardOf(`${WS}/scout`, config.shardCount));
  const db = new Database(dbFile, { readonly: true });
  const rows = new Map<string, number>();
  for (const row of db.prepare('SELECT cid, count(*) n FROM t GROUP BY cid').all() as { cid: string; n: number }[]) rows.set(row.cid, row.n);
  db.close();
  let ranOnce = 0;
  let doubled = 0;
  let lostApproved = 0;
  let ranRejected = 0;
  let stuck = 0;
  let wrongAnswer = 0;
  let decisionLost = 0;
  let unacked = 0;
  const bad: string[] = [];
  for (const c of cases) {
    const n = rows.get(c.callId) ?? 0;
    const record = await store.get(c.approvalId);
    const state = record?.state;
    if (!c.acked) unacked++;
    if (c.acked && state !== c.acked) {
      decisionLost++;
      bad.push(`${c.callId}: acked ${c.acked}, record ${state}`);
    }
    if (n > 1) doubled++;
    if (!c.end) {
      stuck++;
      bad.push(
        `${c.callId}: no end (${c.answers.join(' ')}), acked ${c.acked}, killed ${c.deciderKilled}, record ${state} announced ${record ? await store.announced(c.approvalId) : '-'}`,
      );
    }
    if (c.acked === 'approved') {
      if (n === 1) ranOnce++;
      if (n === 0 && c.end) {
        lostApproved++;
        bad.push(`${c.callId}: approved, ended ${c.end}, not in the database`);
      }
      if (c.end && c.end !== 'ok') wrongAnswer++;
    } else if (c.acked === 'rejected') {
      if (n > 0) {
        ranRejected++;
        bad.push(`${c.callId}: rejected, yet ran`);
      }
      if (c.end && c.end !== 'APPROVAL_REJECTED') wrongAnswer++;
    }
  }
  const summary = {
    fsync: FSYNC,
    calls: cases.length,
    s: Math.round((Date.now() - t0) / 1000),
    faults,
    deciderKilled: cases.filter((c) => c.deciderKilled).length,
    recordedByKilled: cases.filter((c) => c.recordedByKilled).length,
    approved: cases.filter((c) => c.acked === 'approved').length,
    rejected: cases.filter((c) => c.acked === 'rejected').length,
    unacked,
    ranOnce,
    doubled,
    lostApproved,
    ranRejected,
    stuck,
    wrongAnswer,
    decisionLost,
    load: os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' '),
  };
  console.log(JSON.stringify(summary));
  for (const b of bad.slice(0, 20)) console.log(' ', b);
  await client.close();
  r.disconnect();
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const w of workers) w.kill('SIGKILL');
    await killRedis();
    fs.rmSync(out, { recursive: true, force: true });
  });
