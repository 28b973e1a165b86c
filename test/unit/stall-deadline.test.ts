import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { pieces, stallDeadline } from '../../src/policy/stall-deadline.ts';

/** A source of `n` pieces of 16 KiB. */
const source = (n: number) =>
  Readable.from(
    (function* () {
      for (let i = 0; i < n; i++) yield Buffer.alloc(16 * 1024, 120);
    })(),
    { objectMode: false },
  );

describe('stallDeadline', () => {
  it('cuts off a download whose reader takes nothing', async () => {
    const body = source(200);
    // A reader that takes the first write and never another.
    const never = new Writable({ highWaterMark: 1024, write: () => undefined });
    const stalled = new Promise<void>((resolve) => stallDeadline(body, 50, resolve));
    body.pipe(never);
    await stalled;
    body.destroy();
  });

  it('lets a slow reader that keeps taking pieces finish, however long the whole takes', async () => {
    const body = source(80);
    let stalls = 0;
    // The deadline is far past each piece's wait, the whole download far past the deadline.
    stallDeadline(body, 1000, () => stalls++);
    const slow = new Writable({ highWaterMark: 1024, write: (_chunk, _enc, done) => void setTimeout(done, 20) });
    await pipeline(body, slow);
    expect(stalls).toBe(0);
  });
});

describe('pieces', () => {
  it('cuts text into pieces of at most the size given, never inside a surrogate pair', () => {
    expect([...pieces('abc', 8)]).toEqual(['abc']);
    expect([...pieces('abcdefgh', 3)]).toEqual(['abc', 'def', 'gh']);
    const text = `ab${'😀'}cd`;
    const cut = [...pieces(text, 3)];
    expect(cut.join('')).toBe(text);
    expect(cut[0]).toBe(`ab${'😀'}`);
  });
});
