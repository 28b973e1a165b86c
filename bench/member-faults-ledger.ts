// Faults against members' exactly-once paths, with a ledger of every answer (session 27, K1).
//
// A redis-server of its own (AOF, fsync always), two `agentdb worker` processes (this checkout's
// build), and the HTTP app (/v1/calls, /mcp) in this process. Two members write the shared
// tables over /v1/calls and over /mcp, each under a call id of their own; an agent with
// `approval: write` writes over /mcp without one (its waits park for a person, its resends join),
// and a member approves what waits. Every answer is kept; whatever is not an outcome is sent
// again under the same id (the same tools/call for the agent). Faults, per FAULTS (comma list):
//   worker    SIGKILL of one worker, started again
//   children  SIGKILL of a worker's executor children
//   aof       Redis SIGKILLed and started again from its AOF
//   empty     Redis SIGKILLed and started again EMPTY (the registry put back, as an operator would)
// Then the databases are read and checked: each write answered ok is there once with the row id
// it was answered with, none answered failed without mayStillRun is there, all answers of one
// call agree, one approval per call, metered writes = ok writes.
//   npm run build && FAULTS=worker,children,aof RUN_S=120 node --import tsx bench/member-faults-ledger.ts
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { ApprovalService } from '../src/approvals/approval-service.ts';
import { KeyedCalls } from '../src/calls/bearer-key-calls.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { readUsage } from '../src/calls/usage.ts';
import { loadConfig } from '../src/config.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { buildApp } from '../src/http/app.ts';
import { mcpWaiting } from '../src/mcp/waiting-calls.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { MemberRegistry } from '../src/registry/members.ts';
import { KeyAuthenticator } from '../src/registry/principal.ts';
import { PrincipalCache } from '../src/registry/principal-cache.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { freePort, OwnRedis } from '../test/helpers/own-redis.ts';
import { startCli } from '../test/helpers/processes.ts';
import { mcpReplyJson } from './mcp-reply.ts';

const RUN_MS = Number(process.env.RUN_S ?? 120) * 1000;
const FAULTS = (process.env.FAULTS ?? 'worker,children,aof').split(',').filter(Boolean);
const WS = 'k1';
const MEMBERS = ['ada', 'bob'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Write {
  who: string;
  via: 'v1' | 'mcp' | 'mcp-approval';
  cid: string;
  /** Every answer, in order: an envelope, a status, or a transport error. */
  answers: { at: number; ok?: boolean; code?: string; mayStillRun?: boolean; status?: string; rowid?: number; callId?: string; error?: string }[];
  outcome?: 'ok' | 'failed';
}

/** What /v1/calls answers, and what an MCP result is made into (the same fields). */
interface Envelope {
  ok?: boolean;
  status?: string;
  callId?: string;
  mayStillRun?: boolean;
  error?: { code: string };
  result?: { lastInsertRowid?: number };
  approval?: { id: string };
}
/** A page of `GET /v1/approvals`. */
interface ApprovalPage {
  approvals?: { id: string; callId: string }[];
  nextCursor?: string;
}

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-k1-'));
const dataDir = path.join(out, 'data');
/** The workers and the Redis, stopped however the run ends. */
const workers: ChildProcess[] = [];
let ownRedis: OwnRedis | undefined;

async function main(): Promise<void> {
  const redis = await OwnRedis.start();
  ownRedis = redis;
  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    AGENTDB_PREFIX: WS,
    AGENTDB_DATA_DIR: dataDir,
    SHARD_COUNT: '4',
    EXECUTOR_POOL_SIZE: '2',
    RATE_LIMITS: 'off',
    LEASE_TTL_MS: '2000',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '2000',
    LOG_LEVEL: 'info',
  };
  const config = loadConfig(env);
  const keys = keysFor(config.prefix);
  const r = new Redis(redis.url, { maxRetriesPerRequest: null });
  r.on('error', () => undefined);
  await new WorkspaceRegistry(r, keys).put(WS, 'pro');
  const members = new MemberRegistry(r, keys);
  const key: Record<string, string> = {};
  for (const m of MEMBERS) key[m] = (await members.add(WS, m, 'admin')).key;
  const agents = new AgentRegistry(r, keys);
  await agents.put(WS, 'scout', { displayName: 'Scout', settings: { database: 'agent', approval: 'write' } });
  key.scout = (await new AgentKeyRing(r, keys, agents).mint(WS, 'scout')).key;
  // The registry as an operator keeps it: put back after Redis comes back empty.
  const registry: [string, Buffer][] = [];
  for (const k of await r.keys(`${config.prefix}:*`)) registry.push([k, (await r.dumpBuffer(k))!]);

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

  const approvals = new ApprovalService({ redis: r, prefix: config.prefix, shardCount: config.shardCount, members });
  const client = new AgentDbClient({ redisUrl: redis.url, prefix: config.prefix, shardCount: config.shardCount, rateLimits: false });
  const calls = new KeyedCalls(client);
  const principals = new PrincipalCache(new Redis(redis.url), keys.registryChanges, 60_000);
  void principals.start();
  const app = buildApp({
    redis: r,
    shardCount: config.shardCount,
    members,
    approvals,
    keyed: {
      auth: new KeyAuthenticator(r, keys, principals),
      calls,
      waitMs: 3000,
      approvalWaitMs: 2000,
      mcpWaiting: mcpWaiting({ redis: r, keys, calls, approvalTtlMs: config.approvalTtlMs, resultTtlS: config.resultTtlS }),
    },
  });
  const port = await freePort();
  await app.listen({ port, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${port}`;
  const headers = (who: string) => ({ authorization: `Bearer ${key[who]}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' });

  const v1 = async (who: string, body: unknown) => {
    const res = await fetch(`${base}/v1/calls`, { method: 'POST', headers: headers(who), body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as Envelope };
  };
  const mcp = async (who: string, params: unknown) => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: headers(who),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
    });
    const text = await res.text();
    const json = mcpReplyJson(text);
    const res2 = json.result;
    if (!res2) throw new Error(`mcp ${JSON.stringify(json.error ?? json).slice(0, 100)}`);
    const sc = res2.structuredContent ?? {};
    // As the envelope /v1/calls answers: a status, a refusal, or a result.
    if (sc.status) return sc;
    if (res2.isError) return { ok: false, callId: sc.callId, error: sc.error, ...(sc.mayStillRun ? { mayStillRun: true } : {}) };
    return { ok: true, callId: sc.callId, result: sc };
  };
  for (const [who, sql] of [
    ['ada', 'CREATE TABLE t (id INTEGER PRIMARY KEY, cid TEXT NOT NULL)'],
    ['scout', 'CREATE TABLE t (id INTEGER PRIMARY KEY, cid TEXT NOT NULL)'],
  ] as const) {
    // The agent's own table waits for approval like any write of it: a member approves it.
    const first = await v1(who, { tool: 'DATA_WRITE_SQL', callId: `setup-${who}`, arguments: { sql } });
    if (first.body.status === 'awaiting_approval')
      await approvals.decide(first.body.approval!.id, { decision: 'approve', by: { workspace: WS, name: 'ada', role: 'admin' }, via: 'key' });
    for (;;) {
      const got = await fetch(`${base}/v1/calls/setup-${who}?wait=true`, { headers: headers(who) });
      const b = (await got.json()) as Envelope;
      if (b.ok === true) break;
      if (b.ok === false && !b.status) throw new Error(`setup ${who}: ${JSON.stringify(b)}`);
    }
  }

  const writes: Write[] = [];
  let stop = false;
  const note = (w: Write, env: Envelope) => {
    const a: Write['answers'][number] = { at: Date.now() };
    if (env.status) a.status = env.status;
    else {
      a.ok = env.ok;
      if (env.ok) a.rowid = Number(env.result?.lastInsertRowid);
      else a.code = env.error?.code;
      if (env.mayStillRun) a.mayStillRun = true;
    }
    if (env.callId) a.callId = env.callId;
    w.answers.push(a);
    // An outcome is an envelope without a status; a failure that may still run, or one answered
    // while the service could not tell (UNAVAILABLE), is sent again under the same id.
    if (a.status || (a.ok === false && (a.mayStillRun || a.code === 'UNAVAILABLE'))) return false;
    w.outcome = a.ok ? 'ok' : 'failed';
    return true;
  };
  const resendUntilOutcome = async (w: Write, send: () => Promise<Envelope>) => {
    for (let tries = 0; ; tries++) {
      try {
        if (note(w, await send())) return;
      } catch (err) {
        w.answers.push({ at: Date.now(), error: String((err as Error).message).slice(0, 120) });
      }
      if (stop && tries > 200) return;
      await sleep(100);
    }
  };
  let seq = 0;
  const v1Loop = async (who: string) => {
    while (!stop) {
      const w: Write = { who, via: 'v1', cid: `${who}-v1-${++seq}`, answers: [] };
      writes.push(w);
      const body = { tool: 'DATA_WRITE_SQL', callId: w.cid, arguments: { sql: 'INSERT INTO t (cid) VALUES (?)', params: [w.cid] } };
      await resendUntilOutcome(w, async () => (await v1(who, body)).body);
    }
  };
  const mcpLoop = async (who: string) => {
    while (!stop) {
      const w: Write = { who, via: 'mcp', cid: `${who}-mcp-${++seq}`, answers: [] };
      writes.push(w);
      const params = { name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (cid) VALUES (?)', params: [w.cid] }, _meta: { 'agentdb/callId': w.cid } };
      await resendUntilOutcome(w, async () => await mcp(who, params));
    }
  };
  const approvalLoop = async () => {
    while (!stop) {
      const w: Write = { who: 'scout', via: 'mcp-approval', cid: `scout-mcp-${++seq}`, answers: [] };
      writes.push(w);
      const params = { name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (cid) VALUES (?)', params: [w.cid] } };
      await resendUntilOutcome(w, async () => await mcp('scout', params));
    }
  };
  // Decides until every write has its outcome, so none is left waiting for a person at the end.
  let settled = false;
  const approver = async () => {
    while (!settled) {
      try {
        const res = await fetch(`${base}/v1/approvals?state=pending&workspace=${WS}`, { headers: headers('bob') });
        const ids = (((await res.json()) as ApprovalPage).approvals ?? []).map((a) => a.id);
        if (ids.length)
          await fetch(`${base}/v1/approvals/decide`, { method: 'POST', headers: headers('bob'), body: JSON.stringify({ ids, decision: 'approve' }) });
      } catch {
        // Redis down: the next round
      }
      await sleep(700);
    }
  };

  const faults: { fault: string; at: number; detail?: string }[] = [];
  const faultLoop = async () => {
    const gap = RUN_MS / (FAULTS.length + 1);
    for (const f of FAULTS) {
      await sleep(gap);
      const at = Date.now();
      if (f === 'worker') {
        const w = workers[0]!;
        const gone = new Promise((res) => w.once('exit', res));
        w.kill('SIGKILL');
        await gone;
        await startWorker(0);
        faults.push({ fault: f, at });
      } else if (f === 'children') {
        const pid = workers[1]!.pid!;
        const kids = fs
          .readdirSync(`/proc/${pid}/task`)
          .flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
        for (const k of kids) process.kill(k, 'SIGKILL');
        faults.push({ fault: f, at, detail: `${kids.length} children` });
      } else if (f === 'aof' || f === 'empty') {
        await redis.kill();
        if (f === 'empty') redis.wipe();
        await sleep(1000);
        await redis.start();
        if (f === 'empty') for (const [k, v] of registry) await r.restore(k, 0, v, 'REPLACE');
        faults.push({ fault: f, at });
      }
      console.error(`${new Date().toISOString()} ${f}`);
    }
  };
  const loops = [...MEMBERS.flatMap((m) => [v1Loop(m), v1Loop(m), mcpLoop(m)]), approvalLoop(), approvalLoop()];
  const deciding = approver();
  const progress = setInterval(() => {
    const open = writes.filter((w) => !w.outcome);
    console.error(
      `${new Date().toISOString()} writes ${writes.length}, open ${open.length}: ${open
        .map((w) => `${w.cid} ${JSON.stringify(w.answers.at(-1) ?? {})}`)
        .join(' | ')
        .slice(0, 600)}`,
    );
  }, 5000);
  await faultLoop();
  await sleep(RUN_MS / (FAULTS.length + 1));
  stop = true;
  await Promise.all(loops);
  settled = true;
  await deciding;
  clearInterval(progress);

  // The checks.
  const rowsOf = (agent?: string) => {
    const id = agent ? `${WS}/${agent}` : WS;
    const db = new Database(databasePath(dataDir, WS, agent, shardOf(id, config.shardCount)), { readonly: true });
    try {
      return db.prepare('SELECT id, cid FROM t').all() as { id: number; cid: string }[];
    } finally {
      db.close();
    }
  };
  const idsOf = new Map<string, number[]>();
  for (const row of [...rowsOf().map((x) => ({ ...x, db: 'w' })), ...rowsOf('scout').map((x) => ({ ...x, db: 's' }))])
    idsOf.set(row.cid, [...(idsOf.get(row.cid) ?? []), row.id]);
  const report: Record<string, unknown> = { out, faults: faults.map((f) => ({ ...f, at: new Date(f.at).toISOString() })), runS: RUN_MS / 1000 };
  const holes = {
    missing: [] as string[],
    doubled: [] as string[],
    wrongRowid: [] as string[],
    failedPresent: [] as string[],
    disagree: [] as string[],
    noOutcome: [] as string[],
  };
  const by: Record<string, { writes: number; ok: number; failed: number; resent: number; answersWithMayStillRun: number; transportErrors: number }> = {};
  for (const w of writes) {
    const b = (by[w.via] ??= { writes: 0, ok: 0, failed: 0, resent: 0, answersWithMayStillRun: 0, transportErrors: 0 });
    b.writes++;
    if (w.answers.length > 1) b.resent++;
    b.answersWithMayStillRun += w.answers.filter((a) => a.mayStillRun).length;
    b.transportErrors += w.answers.filter((a) => a.error).length;
    const ids = idsOf.get(w.cid) ?? [];
    if (ids.length > 1) holes.doubled.push(w.cid);
    if (!w.outcome) {
      holes.noOutcome.push(w.cid);
      continue;
    }
    const oks = w.answers.filter((a) => a.ok === true);
    if (new Set(oks.map((a) => a.rowid)).size > 1) holes.disagree.push(w.cid);
    if (w.outcome === 'ok') {
      b.ok++;
      if (ids.length === 0) holes.missing.push(w.cid);
      else if (ids[0] !== oks.at(-1)!.rowid) holes.wrongRowid.push(`${w.cid}: ${oks.at(-1)!.rowid} answered, ${ids[0]} in db`);
    } else b.failed++;
    // A failure without mayStillRun says the write did not happen: any such answer of a write that is there is a lie.
    if (ids.length && w.answers.some((a) => a.ok === false && !a.mayStillRun))
      holes.failedPresent.push(`${w.cid} ${w.answers.map((a) => a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>')}`);
  }
  report.by = by;
  const codes: Record<string, number> = {};
  for (const w of writes.filter((x) => x.outcome === 'failed'))
    codes[`${w.via} ${w.answers.at(-1)!.code}`] = (codes[`${w.via} ${w.answers.at(-1)!.code}`] ?? 0) + 1;
  report.failedCodes = codes;
  report.holes = Object.fromEntries(Object.entries(holes).map(([k, v]) => [k, { count: v.length, some: v.slice(0, 10) }]));
  // One approval per call.
  const perCall = new Map<string, number>();
  let cursor: string | undefined;
  do {
    const res = await fetch(`${base}/v1/approvals?state=all&workspace=${WS}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {
      headers: headers('bob'),
    });
    const page = (await res.json()) as ApprovalPage;
    for (const a of page.approvals ?? []) perCall.set(a.callId, (perCall.get(a.callId) ?? 0) + 1);
    cursor = page.nextCursor;
  } while (cursor);
  report.approvals = { calls: perCall.size, twice: [...perCall].filter(([, n]) => n > 1).map(([c]) => c) };
  const usage = await readUsage(r, keys, WS);
  const metered = usage.filter((u) => u.tool === 'DATA_WRITE_SQL' && !u.agent.startsWith('setup')).reduce((n, u) => n + u.calls, 0);
  report.usage = { meteredWrites: metered, okWrites: writes.filter((w) => w.outcome === 'ok').length + 2, rows: usage };
  fs.writeFileSync(path.join(out, 'writes.json'), JSON.stringify(writes));
  fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(report, null, 1));
  console.log(JSON.stringify(report, null, 1));

  await app.close();
  await client.close();
  await approvals.close();
  principals.close();
  for (const w of workers)
    await new Promise<void>((res) => {
      if (w.exitCode !== null || w.signalCode !== null) return res();
      w.once('exit', () => res());
      w.kill('SIGTERM');
    });
  r.disconnect();
  await redis.remove();
  if (!process.env.KEEP) fs.rmSync(dataDir, { recursive: true, force: true });
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
    for (const w of workers) w.kill('SIGKILL');
  })
  .finally(() => ownRedis?.kill())
  .finally(() => process.exit());
