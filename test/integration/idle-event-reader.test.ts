import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { okEnvelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { completedEvent, EventReader } from '../../src/redis/events.ts';
import type { StreamedEvent } from '../../src/redis/event-types.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 37, M4: a client's event reader read every completion of the service's stream, its own
// client's calls or not. One waiting on nothing (a runtime between calls, an HTTP process with no
// request in flight) was woken by each, and wrote the next XREAD each time.
let sb: Sandbox;
let monitor: Redis;
/** What the monitor's commands are given to, set by the test that watches them. */
let onCommand: ((args: string[], source: string) => void) | undefined;
beforeAll(async () => {
  sb = sandbox();
  // Before the workers start: begun while their blocking reads stream past, ioredis's monitor
  // connection failed on a reply that came in the same read as MONITOR's OK.
  monitor = await new Redis(sb.config.redisUrl).monitor();
  monitor.on('monitor', (_time: string, args: string[], source: string) => onCommand?.(args, source));
  await sb.pool();
});
afterAll(async () => {
  monitor.disconnect();
  await sb.cleanup();
});

const read = (client: AgentDbClient, agent: string, i: number) =>
  client.call({ workspace: 'idle', agent, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ? AS i', params: [i] } });

describe("an idle client's event reader", () => {
  it("sends no XREAD while nobody in its client waits, however many other clients' calls complete, and answers its next calls", async () => {
    // The idle client's events connection: the one that reads this test's stream (its prefix is
    // this file's alone) while it is the only client. By name alone, another file's clients running
    // beside it on the same Redis counted too.
    const stream = keysFor(sb.config.prefix).events;
    const readers = new Set<string>();
    let counting = false;
    const fromIdle: string[] = [];
    onCommand = (args, source) => {
      if (args[0]?.toLowerCase() !== 'xread' || !args.includes(stream)) return;
      if (!counting) readers.add(source);
      else if (readers.has(source)) fromIdle.push(args.join(' '));
    };
    const idle = sb.client();
    expect((await read(idle, 'quiet', 0)).ok).toBe(true);
    await expect.poll(() => readers.size).toBe(1);
    counting = true;
    const busy = sb.client();
    for (let i = 0; i < 30; i++) expect((await read(busy, 'busy', i)).ok).toBe(true);
    // Every completion above went through the stream: the busy client's own reader read them.
    expect(fromIdle).toEqual([]);
    // Waited on again, it reads again: its next call answers, and a lookup by id too.
    const again = await read(idle, 'quiet', 1);
    expect(again).toMatchObject({ ok: true, result: { rows: [[1]] } });
    expect(fromIdle.length).toBeGreaterThan(0);
    const looked = await idle.result(again.callId, { workspace: 'idle', agent: 'quiet', wait: true });
    expect(looked).toMatchObject({ ok: true, callId: again.callId });
    expect(idle.waitCounts()).toEqual({ calls: 0, waits: 0, looks: 0 });
    onCommand = undefined;
  });

  it('parks while idle, and resumed reads on from where it stopped, or from a later id it is given', async () => {
    const redis = connectRedis(sb.config.redisUrl);
    const stream = `${keysFor(sb.config.prefix).events}:parked`;
    const complete = (callId: string) =>
      redis.xadd(stream, '*', 'type', 'call.completed', 'data', completedEvent(okEnvelope(callId, 'DATA_QUERY_SQL', 1, {}), 'w', 'a').json);
    const seen: string[] = [];
    let ended!: () => void;
    let idle = true;
    const reader = new EventReader(
      connectRedis(sb.config.redisUrl, { blocking: true }),
      stream,
      '0-0',
      (e: StreamedEvent) => {
        seen.push(e.callId!);
        if (e.callId?.startsWith('end')) ended();
      },
      undefined,
      () => idle,
    );
    const endOf = () => new Promise<void>((resolve) => (ended = resolve));
    reader.start();
    expect(reader.parkedSince()).toBeTypeOf('number');
    await complete('while-parked');
    let end = endOf();
    idle = false;
    reader.resume();
    await complete('end-1');
    await end;
    // From where it stopped: the event added while it was parked is read too.
    expect(seen).toEqual(['while-parked', 'end-1']);

    // Parked again (at its next turn), then resumed from a later id: what lay between is skipped.
    idle = true;
    while (reader.parkedSince() === undefined) await new Promise((r) => setImmediate(r));
    await complete('before');
    const skippedId = await complete('skipped');
    end = endOf();
    idle = false;
    reader.resume(skippedId!);
    await complete('end-2');
    await end;
    expect(seen).toEqual(['while-parked', 'end-1', 'end-2']);
    await reader.stop();
    await redis.del(stream);
    redis.disconnect();
  });
});
