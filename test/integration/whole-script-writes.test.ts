// A script whose arguments hold Buffers (BullMQ's packed ones: the caller's admitted add, the
// worker's finish) is written in one piece (`whole-script-writes.ts`, issue 31): the bytes must
// be ioredis's own to the byte, and the script must still run by EVAL on a socket's first send
// and by EVALSHA after, its Buffers reaching Lua as they were.
import { randomUUID } from 'node:crypto';
import { Command, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mixedCommandBytes, writeScriptWhole } from '../../src/redis/whole-script-writes.ts';
import { REDIS_URL } from '../helpers/harness.ts';

/** ioredis's own bytes for the command, as it writes them (its arguments normalised first). */
function ioredisBytes(name: string, args: (string | Buffer)[]): Buffer {
  const command = new Command(name, args);
  (command as unknown as { stringifyArguments(): void }).stringifyArguments();
  const out = command.toWritable(undefined as never);
  return typeof out === 'string' ? Buffer.from(out) : out;
}

describe('a script command with Buffer arguments', () => {
  it('is written as the very bytes ioredis writes', () => {
    const packed = Buffer.from([0x99, 0xd9, 0x20, 0xde, 0x00, 0x0b, 0xa5, 0xff, 0x0d, 0x0a]);
    const cases: (string | Buffer)[][] = [
      ['sha', '2', 'k:{a}:1', 'k:{a}:2', packed, '{"x":"é ü 漢"}', Buffer.alloc(0), '', packed, '17'],
      [packed],
      ['a', packed, packed, 'z'],
      ['only', 'text', Buffer.from('x')],
    ];
    for (const args of cases) for (const name of ['evalsha', 'eval']) expect(mixedCommandBytes(name, args).equals(ioredisBytes(name, args))).toBe(true);
  });

  describe('on a connection', () => {
    let redis: Redis;
    let other: Redis;
    const key = `test-whole-script:${randomUUID()}`;
    // Text of its own, so that its sha is new to Redis and the first send must be EVAL.
    const lua = `-- ${randomUUID()}\nredis.call('SET', KEYS[1], ARGV[1])\nreturn {redis.call('STRLEN', KEYS[1]), ARGV[2]}`;

    beforeAll(() => {
      redis = new Redis(REDIS_URL);
      other = new Redis(REDIS_URL);
    });

    afterAll(async () => {
      await redis.del(key);
      redis.disconnect();
      other.disconnect();
    });

    it('runs by EVAL first and EVALSHA after, its Buffers as sent', async () => {
      const sent: string[] = [];
      for (const r of [redis, other]) {
        await r.ping();
        r.defineCommand('wholeTest', { lua, numberOfKeys: 1 });
        writeScriptWhole(r, 'wholeTest');
        const write = r.stream.write.bind(r.stream);
        r.stream.write = ((chunk: string | Buffer, ...rest: never[]) => {
          // `*<n>\r\n$<len>\r\n<name>\r\n…`: the command's name.
          sent.push(Buffer.from(chunk).toString('latin1').split('\r\n')[2]!.toLowerCase());
          return write(chunk, ...rest);
        }) as typeof r.stream.write;
      }
      const value = Buffer.from([0x00, 0x80, 0xff, 0x0d, 0x0a, 0x99]);
      const run = (r: Redis, tag: string) =>
        (r as Redis & { wholeTest(k: string, v: Buffer, t: string): Promise<[number, string]> }).wholeTest(key, value, tag);
      expect(await run(redis, 'one')).toEqual([6, 'one']);
      expect((await redis.getBuffer(key))!.equals(value)).toBe(true);
      expect(await run(redis, 'two')).toEqual([6, 'two']);
      expect(await run(other, 'three')).toEqual([6, 'three']);
      expect(await run(other, 'four')).toEqual([6, 'four']);
      // Each connection's first send carries the text, its next the sha.
      expect(sent.filter((s) => s === 'eval' || s === 'evalsha')).toEqual(['eval', 'evalsha', 'eval', 'evalsha']);
    });
  });
});
