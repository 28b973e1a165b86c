import { describe, expect, it } from 'vitest';
import { exitFor, exitForAll } from '../../src/cli/exit-status.ts';

// The one mapping every `agentdb` command exits by (docs/errors.md, "Exit status of `agentdb`
// commands"); test/e2e/cli-exit-status.test.ts runs the built CLI through it.
describe('exitFor', () => {
  it('is 2 for input that is not valid, 3 for what may pass later, 1 for the rest', () => {
    expect(['INVALID_ARGUMENTS', 'UNKNOWN_TOOL', 'CONFIG_MISMATCH'].map((c) => exitFor(c as 'INVALID_ARGUMENTS'))).toEqual([2, 2, 2]);
    expect(['UNAVAILABLE', 'NO_WORKER', 'RATE_LIMITED', 'STORAGE_FULL'].map((c) => exitFor(c as 'UNAVAILABLE'))).toEqual([3, 3, 3, 3]);
    expect(['NOT_FOUND', 'SQL_REFUSED', 'APPROVAL_CONFLICT', 'QUOTA_EXCEEDED'].map((c) => exitFor(c as 'NOT_FOUND'))).toEqual([1, 1, 1, 1]);
  });

  it('is 3 for a refusal that says when it may be sent again, as HTTP answers it 429', () => {
    // The Redis budget's QUOTA_EXCEEDED carries retryAfter; the disk quota's does not.
    expect(exitFor('QUOTA_EXCEEDED', 3600)).toBe(3);
    expect(exitFor('QUOTA_EXCEEDED')).toBe(1);
  });
});

describe('exitForAll', () => {
  it('is 0 for no failure, 3 when each may pass later, 1 when any would fail again', () => {
    expect(exitForAll([])).toBe(0);
    expect(exitForAll([{ code: 'NO_WORKER' }, { code: 'QUOTA_EXCEEDED', retryAfter: 60 }])).toBe(3);
    expect(exitForAll([{ code: 'NO_WORKER' }, { code: 'SQL_REFUSED' }])).toBe(1);
    expect(exitForAll([{ code: 'INVALID_ARGUMENTS' }])).toBe(1);
  });
});
