import { describe, expect, it } from 'vitest';
import { untrustedFence } from '../../src/mcp/tool-result.ts';

const boundaryOf = (text: string) => /^<untrusted-data-([0-9a-f]{24})>$/m.exec(text)![1]!;

// Boundaries come from a pool of random bytes refilled 256 at a time: across refills each is
// still 96 fresh bits, never one handed out before.
describe('fence boundaries', () => {
  it('are 24 hex digits and never repeat, across pool refills', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) seen.add(boundaryOf(untrustedFence(`row ${i}`)));
    expect(seen.size).toBe(1000);
  });
});
