import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { okEnvelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { completedEvent, EventReader, type StreamedEvent } from '../../src/redis/events.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 37, M4: a client's event reader read every completion of the service's stream, its own
// client's calls or not. One waiting on nothing (a runtime between calls, an HTTP process with no
// request in flight) was woken by each, and wrote the next XREAD each time.
let sb: Sandbox;
beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
});
afterAll(async () => {
  await sb.cleanup();
});

const read = (client: AgentDbClient, agent: string, i: number) =>
  client.call({ workspace: 'idle', agent, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ? AS i', params: [i] } });

describe("an idle client's event reader", () => {
  it("sends no XREAD while nobody in its client waits, however many other clients' calls complete, and answers its next calls", async () => {
    const idle = sb.client();
    expect((await read(idle, 'quiet', 0)).ok).toBe(true);
    const admin = new Redis(sb.config.redisUrl);
    // Its events connection, the only one of the prefix's clients so far.
    const list = (await admin.client('LIST')) as string;
    const readers = list.split('\n').filter((l) => / name=agentdb-events /.test(l));
    expect(readers).toHaveLength(1);
    const addr = /addr=(\S+)/.exec(readers[0]!)![1]!;
    const monitor = await new Redis(sb.config.redisUrl).monitor();
    const fromIdle: string[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source.endsWith(addr) && args[0]?.toLowerCase() === 'xread') fromIdle.push(args.join(' '));
    });
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
    monitor.disconnect();
    admin.disconnect();
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
