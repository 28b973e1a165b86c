import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { CallCompletion } from '../../src/calls/call-completion.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { callKeyOf } from '../../src/contracts/call-identity.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { okEnvelope, type Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { completedEvent, publishEvent, STREAM_MAX_LEN } from '../../src/redis/events.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { withScripts } from '../../src/redis/lua-scripts.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Issue 27's first fill, scaled down: big results from one workspace against a 256 KiB budget.
const BUDGET = 256 * 1024;
// A result of ~40 KB: under MAX_RESULT_BYTES (64 KiB), so it stays in its envelope, in Redis.
const BIG = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT i, printf('%.1000c','x') AS s FROM c";
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(BUDGET), MAX_PARKED_CALL_BYTES: '4096' });
  await sb.pool();
  client = sb.client();
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

const who = (workspace: string) => ({ workspace, agent: 'scout', settings: { database: 'agent' as const } });

describe("a workspace's Redis budget", () => {
  it('counts each call where it is written and refuses new calls past it with QUOTA_EXCEEDED; another workspace notices nothing', async () => {
    const keys = keysFor(sb.config.prefix);
    const answers: Envelope[] = [];
    for (let i = 0; i < 12; i++) {
      const env = (await client.call({ ...who('hog'), tool: 'DATA_QUERY_SQL', arguments: { sql: BIG, max_rows: 100 } })) as Envelope;
      answers.push(env);
      if (!env.ok) break;
    }
    const ran = answers.filter((e) => e.ok);
    // 40 KB each, counted twice (the job and BullMQ's event stream keep it): the fourth or fifth
    // passes 256 KiB, and the next is refused.
    expect(ran.length).toBeGreaterThanOrEqual(3);
    expect(ran.length).toBeLessThanOrEqual(5);
    const refused = answers.at(-1)!;
    expect(refused).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    if (refused.ok) throw new Error('unreachable');
    expect(refused.error.message).toMatch(
      /Workspace hog holds \d+ bytes in Redis, its budget \(REDIS_BYTES_PER_WORKSPACE: 262144 bytes\) is used up; room comes back from \S+Z/,
    );

    // What is counted covers what Redis keeps of each call: its job (arguments and envelope).
    const queue = new Queue(keys.queueName(shardOf(databaseId('hog', 'scout'), sb.config.shardCount)), { connection: redis, prefix: keys.bullPrefix });
    let stored = 0;
    for (const job of await queue.getCompleted())
      stored += (await redis.call('MEMORY', 'USAGE', `${keys.bullPrefix}:${queue.name}:${job.id}`, 'SAMPLES', '0')) as number;
    const held = Number(await redis.get(keys.redisBudget('hog').held));
    expect(held).toBeGreaterThanOrEqual(BUDGET);
    expect(held).toBeGreaterThanOrEqual(stored);
    // Nothing of the refused call was enqueued.
    expect(await queue.getCompletedCount()).toBe(ran.length);
    await queue.close();

    // Another workspace's calls are counted apart and answer as ever.
    expect(await client.call({ ...who('quiet'), tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } })).toMatchObject({ ok: true });
    expect(await client.call({ ...who('quiet'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({ ok: true });
  });

  it('reserves room for the envelope of each call not yet finished: calls queued behind a slow statement cannot all pass the check', async () => {
    // Hostile review: 298 calls sent at once behind a runaway statement were all admitted under
    // a 4 MiB budget (their arguments alone fit) and held 39 MB once they ran. A client of a
    // prefix no worker serves: its calls stay queued, as behind a runaway.
    const prefix = `${sb.config.prefix}-backlog`;
    const { AgentDbClient } = await import('../../src/calls/client.ts');
    const idle = new AgentDbClient({ redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix, redisBytesPerWorkspace: BUDGET, rateLimits: false });
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => idle.call({ ...who('backlog'), tool: 'DATA_QUERY_SQL', arguments: { sql: BIG } }, { wait: false, timeoutMs: 50 })),
      );
      const queued = answers.filter((a) => 'status' in a && a.status === 'queued').length;
      const refused = answers.filter((a) => !a.ok && 'error' in a && a.error.code === 'QUOTA_EXCEEDED').length;
      // 256 KiB holds two reservations of 128 KiB (with the arguments, the second reaches it).
      expect(queued).toBeLessThanOrEqual(2);
      expect(queued + refused).toBe(20);
      // One entry per queued call, its arguments and its reserved room together, and the sum theirs.
      const { ledger, held } = keysFor(prefix).redisBudget('backlog');
      const entries = await redis.zrange(ledger, 0, -1);
      expect(entries).toHaveLength(queued);
      const sum = entries.reduce((n, m) => n + Number(m.split(':').pop()), 0);
      expect(sum).toBeGreaterThan(queued * 131072);
      expect(Number(await redis.get(held))).toBe(sum);
    } finally {
      await idle.close();
      const doomed = await redis.keys(`${prefix}:*`);
      if (doomed.length > 0) await redis.del(...doomed);
    }
  });

  it('gives room back as kept calls expire (RESULT_TTL_HOURS), and the ledger goes with its last entry', async () => {
    const keys = keysFor(sb.config.prefix);
    const budget = new WorkspaceRedisBudget(redis, keys, BUDGET);
    const later = Date.now() + sb.config.resultTtlS * 1000 + sb.config.approvalTtlMs + 60_000;
    expect(await budget.note('hog', [], later)).toEqual({ held: 0 });
    expect(await redis.exists(keys.redisBudget('hog').ledger, keys.redisBudget('hog').held)).toBe(0);
    expect(await budget.admit('hog', 'pro', [{ callKey: 'k', kind: 'call', bytes: 10, until: later + 1000 }], later)).toBeUndefined();
  });

  it("drops a finished call's reserved room at once: its ledger holds one entry, its arguments and envelope, and the sum is theirs", async () => {
    const keys = keysFor(sb.config.prefix);
    const env = await client.call({ ...who('tidy'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1 AS one' } });
    expect(env).toMatchObject({ ok: true });
    const { ledger, held } = keys.redisBudget('tidy');
    // The worker's note goes ahead of the completion on its connection: counted before it is heard.
    const entries = await redis.zrange(ledger, 0, -1);
    // One entry a call, queued or finished: two (arguments and reserved room, then arguments and
    // envelope) cost each side a ZADD or ZREM more per call, for the same sum.
    expect(entries.map((m) => m.split('|')[1]!.split(':')[0])).toEqual(['done']);
    const sum = entries.reduce((n, m) => n + Number(m.split(':').pop()), 0);
    expect(Number(await redis.get(held))).toBe(sum);
  });

  it("sends the notes of one turn as one script per workspace, ahead of the completions of that turn, one workspace's in their script", async () => {
    const keys = keysFor(sb.config.prefix);
    const conn = withScripts(connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'));
    // What goes out on the connection, in order: each script call as it is sent.
    const sent: string[] = [];
    const note = conn.agentdbBudgetNote.bind(conn);
    const complete = conn.agentdbComplete.bind(conn);
    conn.agentdbBudgetNote = (...args) => (sent.push(String(args[1])), note(...args));
    conn.agentdbComplete = (...args) => (sent.push('completion'), complete(...args));
    try {
      const budget = new WorkspaceRedisBudget(conn, keys);
      const completion = new CallCompletion(conn, keys, budget);
      const noted = conn.agentdbNotedComplete.bind(conn);
      conn.agentdbNotedComplete = (...args) => (sent.push(`completion noting ${String(args[1])}`), noted(...args));
      const until = Date.now() + 60_000;
      const done: Promise<void>[] = [];
      const failed: unknown[] = [];
      for (const [ws, call] of [
        ['turn-a', 'a1'],
        ['turn-b', 'b1'],
        ['turn-a', 'a2'],
      ] as const) {
        // As the worker does: the completion queued first, its note right after, in the same turn.
        const envelope = okEnvelope(call, 'DATA_QUERY_SQL', 1, {});
        done.push(completion.complete(envelope, completedEvent(envelope, ws, 'scout')));
        budget.noteSoon(ws, [{ callKey: call, kind: 'done', bytes: 100, until }], (err) => failed.push(err));
      }
      await Promise.all(done);
      // The first workspace's notes ride in the completions' script; the other's go just before it.
      expect(sent).toEqual([keys.redisBudget('turn-b').ledger, `completion noting ${keys.redisBudget('turn-a').ledger}`]);
      expect(await redis.zrange(keys.redisBudget('turn-a').ledger, 0, -1)).toEqual(['a1|done:100', 'a2|done:100']);
      expect(await redis.zrange(keys.redisBudget('turn-b').ledger, 0, -1)).toEqual(['b1|done:100']);
      expect(Number(await redis.get(keys.redisBudget('turn-a').held))).toBe(200);
      expect(failed).toEqual([]);
    } finally {
      conn.disconnect();
    }
  });

  it('announces the completions a failing note rides with, and reports the note as failed', async () => {
    const keys = keysFor(sb.config.prefix);
    const conn = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      // A ledger of the wrong type: budget-note.lua fails on it, inside the completions' script.
      await redis.set(keys.redisBudget('broken').ledger, 'not a sorted set');
      const budget = new WorkspaceRedisBudget(conn, keys);
      const completion = new CallCompletion(conn, keys, budget);
      const failed: unknown[] = [];
      const envelope = okEnvelope('x1', 'DATA_QUERY_SQL', 1, {});
      const done = completion.complete(envelope, completedEvent(envelope, 'broken', 'scout'));
      budget.noteSoon('broken', [{ callKey: 'x1', kind: 'done', bytes: 100, until: Date.now() + 60_000 }], (err) => failed.push(err));
      await done;
      const events = (await redis.xrevrange(keys.events, '+', '-', 'COUNT', 50)) as [string, string[]][];
      expect(events.some(([, fields]) => fields.some((f) => f.includes('"callId":"x1"') && f.includes('"workspace":"broken"')))).toBe(true);
      expect(failed).toHaveLength(1);
      expect(String(failed[0])).toMatch(/WRONGTYPE/);
    } finally {
      await redis.del(keys.redisBudget('broken').ledger);
      conn.disconnect();
    }
  });

  it('refuses to park a call past MAX_PARKED_CALL_BYTES: LIMIT_EXCEEDED, nothing ran, no approval kept', async () => {
    const gated = { workspace: 'acme', agent: 'bulk', settings: { database: 'agent' as const, approval: 'write' as const } };
    const big = 'y'.repeat(5000);
    const env = await client.call({ ...gated, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE IF NOT EXISTS t (x)' } }, { wait: false });
    expect(env).toMatchObject({ ok: false, status: 'awaiting_approval' });
    const refused = await client.call({ ...gated, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (?)', params: [big] } }, { wait: false });
    expect(refused).toMatchObject({ ok: false, error: { code: 'LIMIT_EXCEEDED', message: expect.stringContaining('MAX_PARKED_CALL_BYTES') } });
    const keys = keysFor(sb.config.prefix);
    // One approval: the small call's.
    expect(await redis.zcard(keys.approvalsAll)).toBe(1);
    // The refused job keeps its answer, not its arguments.
    const jobKey = `${keys.bullPrefix}:${keys.queueName(shardOf(databaseId('acme', 'bulk'), sb.config.shardCount))}:${callKeyOf({ workspace: 'acme', agent: 'bulk', callId: refused.callId })}`;
    expect(JSON.parse((await redis.hget(jobKey, 'data'))!).arguments).toEqual({});
    // The parked call and its record are counted against the workspace until they are let go;
    // the refused call's 5 KB of arguments no longer are (past the sweep of the next count): its
    // answer is (kept RESULT_TTL_HOURS), with what is left of its job.
    const budget = new WorkspaceRedisBudget(redis, keys);
    const refusedKey = callKeyOf({ workspace: 'acme', agent: 'bulk', callId: refused.callId });
    const parkedKey = callKeyOf({ workspace: 'acme', agent: 'bulk', callId: env.callId });
    const largeEntries = async () => {
      await budget.note('acme', [], Date.now() + 1);
      return (await redis.zrange(keys.redisBudget('acme').ledger, 0, -1)).filter((m) => Number(m.split(':').pop()) > 5000);
    };
    // The refused call's arguments and the room reserved for its envelope are gone; the parked
    // call keeps room for the envelope it will leave once decided.
    await expect.poll(async () => (await largeEntries()).filter((m) => m.startsWith(refusedKey))).toEqual([]);
    const [parked, ...others] = await largeEntries();
    expect(others).toEqual([]);
    expect(parked).toMatch(new RegExp(`^${parkedKey}\\|call:(\\d+)$`));
    expect(Number(parked!.split(':').pop())).toBeGreaterThan(131072);
    expect((await budget.note('acme', [])).held).toBeGreaterThan(0);
  });
});

describe('the events stream', () => {
  it('is capped by length (XADD MAXLEN ~), whoever fills it', async () => {
    const stream = keysFor(sb.config.prefix).events;
    for (let i = 0; i < STREAM_MAX_LEN + 5000; i += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, (_, j) => publishEvent(redis, stream, { type: 'approval.requested', callId: `c${i + j}`, approval: {}, at: 0 })),
      );
    }
    // Trimmed by whole nodes of the stream (100 entries each): about the cap, never all 25,000.
    expect(await redis.xlen(stream)).toBeLessThanOrEqual(STREAM_MAX_LEN + 100);
  });
});
