import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor, listedApproval } from '../../src/approvals/approval-listing.ts';
import type { Approval } from '../../src/approvals/approval.ts';
import { jsonBytes } from '../../src/calls/redis-bytes.ts';
import { infoField } from '../../src/redis/memory-headroom.ts';

const base: Approval = {
  id: 'ap_1',
  callId: 'c1',
  callKey: 'acme.scout.c1',
  digest: 'd',
  shard: 0,
  workspace: 'acme',
  agent: 'scout',
  tool: 'DATA_WRITE_SQL',
  tier: 'write',
  database: 'acme/scout',
  shared: false,
  requester: 'scout',
  createdAt: 1,
  expiresAt: 2,
  state: 'pending',
};

describe('an approval in a list', () => {
  it('is left whole when small, without a cut flag', () => {
    const a = { ...base, sql: 'INSERT INTO t VALUES (?)', params: [1, 'x', null] };
    expect(listedApproval(a)).toEqual(a);
  });

  it('has long SQL, long string params and many params cut, and says so', () => {
    const a = { ...base, sql: 's'.repeat(5000), params: ['p'.repeat(1000), ...Array.from({ length: 500 }, (_, i) => i)], rationale: 'r'.repeat(2000) };
    const l = listedApproval(a);
    expect(l.cut).toBe(true);
    expect(l.sql).toBe(`${'s'.repeat(1024)}…[3976 chars cut]`);
    expect(l.rationale!.length).toBeLessThan(1100);
    expect(l.params![0]).toBe(`${'p'.repeat(256)}…[744 chars cut]`);
    expect(JSON.stringify(l.params).length).toBeLessThanOrEqual(1024);
    expect(l.params!.slice(1)).toEqual(Array.from({ length: l.params!.length - 1 }, (_, i) => i));
    // The record itself is not touched.
    expect(a.sql.length).toBe(5000);
  });
});

describe('a list cursor', () => {
  it('round-trips, and anything else is refused', () => {
    expect(decodeCursor(encodeCursor({ score: 1733200000000, id: 'ap_x' }))).toEqual({ score: 1733200000000, id: 'ap_x' });
    for (const bad of ['nonsense', '', Buffer.from('[1]').toString('base64url'), Buffer.from('["1","a"]').toString('base64url')])
      expect(decodeCursor(bad)).toBeUndefined();
  });
});

describe('what the Redis budget counts', () => {
  it("rounds a value's bytes up to the allocator's size class, never below its length", () => {
    for (const n of [2, 17, 100, 4097, 40_000, 65_536, 1_000_001]) {
      const counted = jsonBytes('x'.repeat(n - 2));
      expect(counted).toBeGreaterThanOrEqual(n);
      expect(counted).toBeLessThanOrEqual(Math.max(n + 16, n * 1.25));
    }
  });

  it('reads used_memory and maxmemory from INFO memory', () => {
    const info = '# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:0\r\n';
    expect([infoField(info, 'used_memory'), infoField(info, 'maxmemory'), infoField(info, 'absent')]).toEqual([1048576, 0, 0]);
  });
});
