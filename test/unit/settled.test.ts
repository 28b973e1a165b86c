import { describe, expect, it } from 'vitest';
import { settled } from '../../src/calls/settled.ts';

describe('settled', () => {
  it('runs `after` once as the work settles, before whoever awaits it hears, and passes on its value or error', async () => {
    const order: string[] = [];
    const ok = settled(
      () => Promise.resolve('v'),
      () => order.push('after ok'),
    );
    const failed = settled(
      () => Promise.reject(new Error('boom')),
      () => order.push('after failed'),
    );
    const thrown = settled(
      () => {
        throw new Error('at once');
      },
      () => order.push('after thrown'),
    );
    expect(order).toEqual([]);
    await expect(ok.then((v) => (order.push(`heard ${v}`), v))).resolves.toBe('v');
    await expect(failed).rejects.toThrow('boom');
    await expect(thrown).rejects.toThrow('at once');
    expect(order).toEqual(['after ok', 'after failed', 'after thrown', 'heard v']);
  });
});
