import { describe, expect, it } from 'vitest';
import { ago, relative } from '../../src/http/web/layout.ts';

const NOW = Date.UTC(2026, 0, 5, 12, 0, 0);

describe('relative and ago', () => {
  it('says "just now" where the rounded age is 0 s, never "in 0 s"', () => {
    expect(relative(NOW + 400, NOW)).toBe('just now');
    expect(relative(NOW - 400, NOW)).toBe('just now');
    expect(relative(NOW - 3000, NOW)).toBe('3 s ago');
    expect(relative(NOW + 2 * 3600_000, NOW)).toBe('in 2 h');
  });

  it('clamps a past event stamped ahead of now (another clock) to "just now"', () => {
    expect(ago(NOW + 2000, NOW)).toBe('just now');
    expect(ago(NOW, NOW)).toBe('just now');
    expect(ago(NOW - 5 * 60_000, NOW)).toBe('5 min ago');
  });
});
