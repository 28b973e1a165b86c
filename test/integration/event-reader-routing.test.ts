import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { okEnvelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { completedCaller, completedEvent, EventReader, publishEvent, type CompletedCaller } from '../../src/redis/events.ts';
import type { StreamedEvent } from '../../src/redis/event-types.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Issue 31: a client's event reader sees every client's completions; it parses whole only those
// of calls someone in it waits on, routing the rest by the head of their JSON.
let sb: Sandbox;
beforeAll(() => {
  sb = sandbox();
});
afterAll(async () => {
  await sb.cleanup();
});

const fieldsOf = (json: string) => ['type', 'call.completed', 'data', json];

describe('completedCaller', () => {
  it("reads whose call a completion is off its head, as the whole event's parse does", () => {
    const env = okEnvelope('step-1', 'DATA_QUERY_SQL', 1, { rows: [{ v: 'a "quoted" \\ value' }] });
    const event = completedEvent(env, 'acme', '@ana');
    expect(completedCaller(fieldsOf(event.json))).toEqual({ callId: 'step-1', workspace: 'acme', agent: '@ana' });
    const parsed = JSON.parse(event.json) as CompletedCaller;
    expect(completedCaller(fieldsOf(event.json))).toEqual({ callId: parsed.callId, workspace: parsed.workspace, agent: parsed.agent });
  });

  it('leaves to the whole parse any other event, and a head with an escape or written otherwise', () => {
    const approval = JSON.stringify({ type: 'approval.requested', callId: 'c', approval: {}, at: 1 });
    expect(completedCaller(['type', 'approval.requested', 'data', approval])).toBeUndefined();
    expect(completedCaller(fieldsOf('{"type":"call.completed","callId":"c","workspace":"a\\"b","agent":"x","ok":true,"at":1}'))).toBeUndefined();
    expect(completedCaller(fieldsOf('{"type":"call.completed","workspace":"w","callId":"c","agent":"x","ok":true,"at":1}'))).toBeUndefined();
    expect(completedCaller(fieldsOf('{"type":"call.completed","callId":"c","workspace":"w"'))).toBeUndefined();
    expect(completedCaller(['type', 'call.completed'])).toBeUndefined();
  });

  it('never names another caller than the whole parse does, whatever the names and the data hold (review R2)', () => {
    // Pieces that could pass for the head's own text once JSON-encoded, mixed by a fixed-seed
    // generator: the head either says what JSON.parse says or leaves it to the whole parse.
    const pieces = ['a', '"', '\\', ',', ':', '}', '","workspace":"', '","agent":"', '",', '"ok":true,', '\u2028', '\ud800', '\u0000', 'é'];
    let seed = 31;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const text = () => Array.from({ length: next() % 5 }, () => pieces[next() % pieces.length]).join('');
    let routed = 0;
    for (let i = 0; i < 20_000; i++) {
      const event = completedEvent(okEnvelope(text(), 'DATA_QUERY_SQL', 1, { rows: [[text()]] }), text(), text());
      const head = completedCaller(fieldsOf(event.json));
      if (!head) continue;
      routed++;
      const whole = JSON.parse(event.json) as CompletedCaller;
      expect(head).toEqual({ callId: whole.callId, workspace: whole.workspace, agent: whole.agent });
    }
    expect(routed).toBeGreaterThan(500);
  });
});

describe('EventReader with wanted', () => {
  it("hands on the completions of calls it is asked for and every other event, and skips other callers' completions", async () => {
    const redis = connectRedis(sb.config.redisUrl);
    const stream = keysFor(sb.config.prefix).events;
    const seen: StreamedEvent[] = [];
    let done!: () => void;
    const last = new Promise<void>((resolve) => (done = resolve));
    const reader = new EventReader(
      connectRedis(sb.config.redisUrl, { blocking: true }),
      stream,
      '0-0',
      (e) => {
        seen.push(e);
        if (e.callId === 'end') done();
      },
      (c) => c.workspace === 'mine',
    );
    const complete = (workspace: string, callId: string) =>
      redis.xadd(stream, '*', 'type', 'call.completed', 'data', completedEvent(okEnvelope(callId, 'DATA_QUERY_SQL', 1, {}), workspace, 'scout').json);
    await complete('theirs', 'skipped');
    await complete('mine', 'kept');
    await publishEvent(redis, stream, { type: 'approval.requested', callId: 'parked', approval: { workspace: 'theirs', agent: 'scout' }, at: 1 });
    // Written otherwise (by hand, its fields in another order): parsed whole, so handed on.
    await publishEvent(redis, stream, { type: 'call.completed', workspace: 'theirs', callId: 'other-order', agent: 'scout', ok: true, at: 1 });
    await complete('mine', 'end');
    reader.start();
    await last;
    await reader.stop();
    redis.disconnect();
    expect(seen.map((e) => e.callId)).toEqual(['kept', 'parked', 'other-order', 'end']);
    expect(seen[0]).toMatchObject({ type: 'call.completed', workspace: 'mine', envelope: { ok: true, callId: 'kept' } });
  });
});

describe('EventReader over many reads', () => {
  it('keeps nothing of the reads it has handed on (each read once left its reply held until the reader stopped)', async () => {
    // A collection on demand, as `--expose-gc` gives it, without starting the fork with it.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const redis = connectRedis(sb.config.redisUrl);
    const stream = `${keysFor(sb.config.prefix).events}:many`;
    let handed!: () => void;
    const reader = new EventReader(connectRedis(sb.config.redisUrl, { blocking: true }), stream, '0-0', () => handed());
    reader.start();
    // One event per read, each ~20 KB: a reply kept per read is ~8 MB over 400 reads.
    const padding = 'x'.repeat(20_000);
    const one = async (i: number) => {
      const seen = new Promise<void>((resolve) => (handed = resolve));
      await publishEvent(redis, stream, { type: 'approval.requested', callId: `c${i}`, approval: { padding }, at: i });
      await seen;
    };
    for (let i = 0; i < 50; i++) await one(i);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 50; i < 450; i++) await one(i);
    gc();
    const kept = process.memoryUsage().heapUsed - before;
    await reader.stop();
    await redis.del(stream);
    redis.disconnect();
    expect(kept).toBeLessThan(2_000_000);
  });
});
