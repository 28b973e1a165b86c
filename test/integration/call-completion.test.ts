import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { errorEnvelope, okEnvelope, type Envelope } from '../../src/contracts/envelope.ts';
import { CallCompletion, type Metering } from '../../src/calls/call-completion.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { completedEvent, parseEntry } from '../../src/redis/events.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { meterDay, readUsage } from '../../src/calls/usage.ts';
import { pruneRedis } from '../../src/schedule/redis-maintenance.ts';
import { INLINE_ENVELOPE_BYTES } from '../../src/redis/events.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

let sb: Sandbox;
let own: OwnRedis | undefined;
afterEach(async () => {
  await sb.cleanup();
  await own?.remove();
  own = undefined;
});

describe('call completions', () => {
  it('announces and meters completions issued together, each once and in order, in one command', async () => {
    sb = sandbox();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const completion = new CallCompletion(redis, keys);
    const at = Date.now();
    const done = (e: Envelope, meter?: Metering) => completion.complete(e, completedEvent(e, 'acme', 'scout'), meter);
    // Count the script's invocations: one per batch is the point.
    const scripted = redis as unknown as { agentdbComplete: (...args: unknown[]) => Promise<number> };
    const invoke = scripted.agentdbComplete.bind(redis);
    let commands = 0;
    scripted.agentdbComplete = (...args) => (commands++, invoke(...args));

    // A batch as a busy worker makes it: metered calls of two workspaces, a replay (not
    // metered) and a failure, all finishing in the same turn.
    await Promise.all([
      done(okEnvelope('c1', 'DATA_QUERY_SQL', 1, { rows: [] }), { workspace: 'acme', agent: 'scout', credits: 1, at }),
      done(okEnvelope('c2', 'DATA_WRITE_SQL', 2, { changes: 1 }), { workspace: 'acme', agent: 'scout', credits: 2, at }),
      done(okEnvelope('c3', 'DATA_WRITE_SQL', 2, { changes: 1 })),
      done(errorEnvelope('c4', 'DATA_QUERY_SQL', 'SQL_ERROR', 'no such table: t')),
      done(okEnvelope('c5', 'DATA_QUERY_SQL', 1, { rows: [] }), { workspace: 'other', agent: 'a', credits: 1, at }),
    ]);
    // A lone one afterwards goes out on its own.
    await done(okEnvelope('c6', 'DATA_QUERY_SQL', 1, { rows: [] }), { workspace: 'acme', agent: 'scout', credits: 1, at });

    const events = ((await redis.xrange(keys.events, '-', '+')) as [string, string[]][]).map((e) => parseEntry(e)!);
    expect(events.map((e) => [e.type, e.callId, e.type === 'call.completed' && e.ok])).toEqual([
      ['call.completed', 'c1', true],
      ['call.completed', 'c2', true],
      ['call.completed', 'c3', true],
      ['call.completed', 'c4', false],
      ['call.completed', 'c5', true],
      ['call.completed', 'c6', true],
    ]);
    const first = events[0]!;
    expect(first.type === 'call.completed' && first.envelope).toEqual(okEnvelope('c1', 'DATA_QUERY_SQL', 1, { rows: [] }));

    const day = meterDay(at);
    expect(await readUsage(redis, keys, 'acme')).toEqual([
      { day, agent: 'scout', tool: 'DATA_QUERY_SQL', calls: 2, credits: 2 },
      { day, agent: 'scout', tool: 'DATA_WRITE_SQL', calls: 1, credits: 2 },
    ]);
    expect(await readUsage(redis, keys, 'other')).toEqual([{ day, agent: 'a', tool: 'DATA_QUERY_SQL', calls: 1, credits: 1 }]);
    // Five completions in one script, then the lone one in another.
    expect(commands).toBe(2);
    redis.disconnect();
  });

  it("writes a turn's metering once per agent and tool, and its budget notes' sum once, to the same totals", async () => {
    // A Redis of its own: its command counts (INFO commandstats) are this test's alone.
    own = await OwnRedis.start();
    sb = sandbox({ REDIS_URL: own.url });
    const redis = connectRedis(own.url);
    const keys = keysFor(sb.config.prefix);
    const budget = new WorkspaceRedisBudget(redis, keys);
    const completion = new CallCompletion(redis, keys, budget);
    const now = Date.now();
    const later = now + 3_600_000;
    const calls = ['c1', 'c2', 'c3', 'c4', 'c5'];
    // As callers count them: each call's arguments and room reserved for its envelope.
    await budget.note(
      'acme',
      calls.map((callKey) => ({ callKey, kind: 'call' as const, bytes: 1100, until: later })),
      now,
    );
    await redis.config('RESETSTAT');

    // As a busy worker finishes them, in one turn: each completion, then its note (the caller's
    // entry goes, the arguments and the envelope are counted).
    const at = Date.now();
    const failed: unknown[] = [];
    const done = calls.map((callKey, i) => {
      const tool = i === 4 ? 'DATA_WRITE_SQL' : 'DATA_QUERY_SQL';
      const envelope = okEnvelope(callKey, tool, i === 4 ? 2 : 1, { rows: [] });
      const sent = completion.complete(envelope, completedEvent(envelope, 'acme', 'scout'), {
        workspace: 'acme',
        agent: 'scout',
        credits: i === 4 ? 2 : 1,
        at,
      });
      budget.noteSoon(
        'acme',
        [
          { callKey, kind: 'call', bytes: 1100, until: at },
          { callKey, kind: 'done', bytes: 150, until: later },
        ],
        (err) => failed.push(err),
      );
      return sent;
    });
    await Promise.all(done);
    expect(failed).toEqual([]);

    const counts = new Map<string, number>();
    for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(m[1]!, Number(m[2]));
    // Two usage fields per agent and tool, one index entry per workspace and day, one write of
    // the sum: they were two, one and two per call.
    expect(counts.get('hincrby')).toBe(4);
    expect(counts.get('sadd')).toBe(2);
    expect((counts.get('incrby') ?? 0) + (counts.get('decrby') ?? 0)).toBe(1);

    expect(await readUsage(redis, keys, 'acme')).toEqual([
      { day: meterDay(at), agent: 'scout', tool: 'DATA_QUERY_SQL', calls: 4, credits: 4 },
      { day: meterDay(at), agent: 'scout', tool: 'DATA_WRITE_SQL', calls: 1, credits: 2 },
    ]);
    const { ledger, held } = keys.redisBudget('acme');
    const entries = await redis.zrange(ledger, 0, -1);
    expect(entries).toHaveLength(5);
    expect(Number(await redis.get(held))).toBe(entries.reduce((n, m) => n + Number(m.split(':').pop()), 0));
    expect(Number(await redis.get(held))).toBe(5 * 150);
    expect(await redis.xlen(keys.events)).toBe(5);
    redis.disconnect();
  });

  it("names a workspace's usage day in the index once, with its first count, and again after pruning dropped the day", async () => {
    // A Redis of its own: its command counts (INFO commandstats) are this test's alone.
    own = await OwnRedis.start();
    sb = sandbox({ REDIS_URL: own.url });
    const redis = connectRedis(own.url);
    const keys = keysFor(sb.config.prefix);
    const completion = new CallCompletion(redis, keys);
    const at = Date.now();
    const day = meterDay(at);
    const done = (callId: string, tool: string) => {
      const envelope = okEnvelope(callId, tool, 1, { rows: [] });
      return completion.complete(envelope, completedEvent(envelope, 'acme', 'scout'), { workspace: 'acme', agent: 'scout', credits: 1, at });
    };
    const sadds = async () => Number(/^cmdstat_sadd:calls=(\d+)/m.exec(await redis.info('commandstats'))?.[1] ?? 0);

    // One after the other, as a sequential caller's: a script each.
    for (let i = 0; i < 6; i++) await done(`c${i}`, 'DATA_QUERY_SQL');
    expect(await sadds()).toBe(1);
    // Another tool is a new count in the same day's hash: named again (SADD of a member it has).
    await done('w1', 'DATA_WRITE_SQL');
    await done('w2', 'DATA_WRITE_SQL');
    expect(await sadds()).toBe(2);
    expect(await redis.smembers(keys.usageIndex)).toEqual([`acme|${day}`]);
    expect(await readUsage(redis, keys, 'acme')).toEqual([
      { day, agent: 'scout', tool: 'DATA_QUERY_SQL', calls: 6, credits: 6 },
      { day, agent: 'scout', tool: 'DATA_WRITE_SQL', calls: 2, credits: 2 },
    ]);

    // Pruning drops the day's hash and its name together; the next count names it again.
    expect((await pruneRedis(redis, keys, { now: at + 400 * 24 * 3600 * 1000, usageDays: 1, approvalDays: 1000 })).usageDays).toBe(1);
    expect(await redis.smembers(keys.usageIndex)).toEqual([]);
    await done('c9', 'DATA_QUERY_SQL');
    await done('c10', 'DATA_QUERY_SQL');
    expect(await redis.smembers(keys.usageIndex)).toEqual([`acme|${day}`]);
    expect(await readUsage(redis, keys, 'acme')).toEqual([{ day, agent: 'scout', tool: 'DATA_QUERY_SQL', calls: 2, credits: 2 }]);
    expect(await sadds()).toBe(3);
    redis.disconnect();
  });

  it('announces a result too large for its event only once the job holds it, so no waiter depends on a timer', async () => {
    // A Redis of its own: MONITOR sees every client's commands, and other tests' binary
    // (msgpack) arguments on the shared one trip ioredis's MONITOR parser.
    own = await OwnRedis.start();
    sb = sandbox({ SHARD_COUNT: '1', REDIS_URL: own.url });
    await sb.pool();
    const client = sb.client();
    const keys = keysFor(sb.config.prefix);
    const who = { workspace: 'acme', agent: 'big', settings: { database: 'agent' as const } };
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE big (v TEXT)' } });
    await client.call({
      ...who,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO big SELECT printf('%0200d', i) FROM n" },
    });

    // Redis's own order of execution: the job's result stored (BullMQ's moveToFinished sets
    // finishedOn with it) against the call.completed event. Forced, not hoped for: the event of
    // a large result used to leave first, every time.
    // Read MONITOR's lines off a plain socket: ioredis's monitor mode loses its footing on some
    // of BullMQ's traffic ("Command queue state error"), and the lines are all this needs.
    const monitor = net.createConnection(own.port, '127.0.0.1');
    const order: string[] = [];
    let pending = '';
    monitor.setEncoding('utf8');
    monitor.on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\r\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const stored = new RegExp(`"HSET" "${escapeRegExp(keys.bullPrefix)}:\\{shard-0\\}:acme\\.big\\.(large-\\d+)" .*"finishedOn"`).exec(line);
        if (stored) order.push(`stored ${stored[1]}`);
        const announced = line.includes(`"XADD" "${keys.events}"`) ? /callId\\":\\"(large-\d+)\\"/.exec(line) : null;
        if (announced) order.push(`announced ${announced[1]}`);
      }
    });
    await new Promise<void>((resolve) => monitor.once('connect', () => resolve()));
    monitor.write('MONITOR\r\n');
    await new Promise<void>((resolve) => monitor.once('data', () => resolve()));
    for (let i = 0; i < 5; i++) {
      const env = await client.call({ ...who, callId: `large-${i}`, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM big', max_rows: 100 } });
      expect(env).toMatchObject({ ok: true, result: { truncated: true } });
      expect(JSON.stringify(env).length).toBeGreaterThan(INLINE_ENVELOPE_BYTES);
    }
    await expect.poll(() => order.length).toBe(10);
    monitor.destroy();
    expect(order).toEqual([0, 1, 2, 3, 4].flatMap((i) => [`stored large-${i}`, `announced large-${i}`]));
  });
  it("announces a worker's call without a promise: it joins its turn's batch, and a failure reaches the callback given", async () => {
    sb = sandbox();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const completion = new CallCompletion(redis, keys);
    const scripted = redis as unknown as { agentdbComplete: (...args: unknown[]) => Promise<number> };
    const invoke = scripted.agentdbComplete.bind(redis);
    let commands = 0;
    scripted.agentdbComplete = (...args) => (commands++, invoke(...args));
    const failures: Error[] = [];
    const at = Date.now();
    const a = okEnvelope('a1', 'DATA_QUERY_SQL', 1, { rows: [] });
    const b = okEnvelope('a2', 'DATA_QUERY_SQL', 1, { rows: [] });
    // Nothing to await but the plain completion beside them: announce answers nothing (issue 31).
    expect(
      completion.announce(a, completedEvent(a, 'acme', 'scout'), { workspace: 'acme', agent: 'scout', credits: 1, at }, undefined, (err) => failures.push(err)),
    ).toBeUndefined();
    completion.announce(b, completedEvent(b, 'acme', 'scout'), undefined, undefined, (err) => failures.push(err));
    const c = okEnvelope('a3', 'DATA_QUERY_SQL', 1, { rows: [] });
    await completion.complete(c, completedEvent(c, 'acme', 'scout'));
    expect(commands).toBe(1);
    const events = ((await redis.xrange(keys.events, '-', '+')) as [string, string[]][]).map((e) => parseEntry(e)!);
    expect(events.map((e) => e.callId)).toEqual(['a1', 'a2', 'a3']);
    expect(await readUsage(redis, keys, 'acme')).toEqual([{ day: meterDay(at), agent: 'scout', tool: 'DATA_QUERY_SQL', calls: 1, credits: 1 }]);
    expect(failures).toEqual([]);

    // The stream's key of the wrong type: the script fails, and each announce hears of it once.
    await redis.del(keys.events);
    await redis.set(keys.events, 'not a stream');
    const failed = new Promise<Error>((resolve) => completion.announce(a, completedEvent(a, 'acme', 'scout'), undefined, undefined, resolve));
    expect(String(await failed)).toMatch(/WRONGTYPE/);
    redis.disconnect();
  });
});

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
