import { describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { checkDiskQuota } from '../../src/policy/disk-quota.ts';
import { workspaceLimits, workspaceLimitSources, WORKSPACE_LIMITS } from '../../src/policy/plan-limits.ts';

const limits = { maxDatabases: 3, maxBytes: 1000 };
const refusal = (f: () => void): string => {
  try {
    f();
  } catch (err) {
    expect(codeOf(err)).toBe('QUOTA_EXCEEDED');
    return (err as { detail: string }).detail;
  }
  throw new Error('not refused');
};

describe('the disk-quota rule', () => {
  it('lets a step through within both quotas, up to each', () => {
    expect(() => checkDiskQuota('acme', { databases: 2, bytes: 500 }, { databases: 1, bytes: 500 }, limits, 'a fork')).not.toThrow();
  });

  it('refuses a database past the count, naming the figures and the step', () => {
    expect(refusal(() => checkDiskQuota('acme', { databases: 3, bytes: 0 }, { databases: 1, bytes: 0 }, limits, 'a fork'))).toBe(
      'a fork refused: workspace acme holds 3 databases, its quota is 3 (WORKSPACE_MAX_DATABASES or its plan); no command removes a database, so room comes from a larger plan (agentdb workspaces set --plan) or WORKSPACE_MAX_DATABASES',
    );
  });

  it('refuses bytes past the quota, counting what the step would copy', () => {
    expect(refusal(() => checkDiskQuota('acme', { databases: 1, bytes: 600 }, { databases: 1, bytes: 500 }, limits, 'a fork'))).toMatch(
      /holds 600 bytes on disk and this would add about 500, its quota is 1000 \(WORKSPACE_MAX_BYTES/,
    );
    // Already past it: even a step that copies nothing (a first write) is refused.
    expect(refusal(() => checkDiskQuota('acme', { databases: 1, bytes: 1001 }, { databases: 1, bytes: 0 }, limits, 'creating database acme/x'))).toMatch(
      /^creating database acme\/x refused: workspace acme holds 1001 bytes on disk, its quota/,
    );
  });

  it('tells a workspace past its bytes what brings room back, not a drop that frees nothing', () => {
    // Live (session 27, N3): the refusal said to drop databases or forks, which no command does, and
    // DATA_DROP_TABLE left the workspace as far past its quota (the file keeps its pages, history its commits).
    const detail = refusal(() => checkDiskQuota('acme', { databases: 1, bytes: 1001 }, { databases: 0, bytes: 0 }, limits, 'writes'));
    expect(detail).not.toMatch(/drop databases|forks it no longer needs/);
    expect(detail).toMatch(/dropping tables or deleting rows frees none of it/);
    expect(detail).toMatch(/HISTORY_RETENTION_DAYS is pruned, or with a larger plan \(agentdb workspaces set --plan\) or WORKSPACE_MAX_BYTES$/);
  });

  it("takes the plan's limits, where an operator's settings override them", () => {
    expect(workspaceLimits('pro')).toEqual(WORKSPACE_LIMITS.pro);
    expect(workspaceLimits('enterprise', { maxDatabases: 7 })).toEqual({ maxDatabases: 7, maxBytes: WORKSPACE_LIMITS.enterprise.maxBytes });
  });

  it('says where each limit comes from, the setting that would override it named either way', () => {
    expect(workspaceLimitSources({ maxDatabases: 7 })).toEqual({
      maxDatabases: { setting: 'WORKSPACE_MAX_DATABASES', from: 'setting' },
      maxBytes: { setting: 'WORKSPACE_MAX_BYTES', from: 'plan' },
    });
    expect(workspaceLimitSources()).toEqual({
      maxDatabases: { setting: 'WORKSPACE_MAX_DATABASES', from: 'plan' },
      maxBytes: { setting: 'WORKSPACE_MAX_BYTES', from: 'plan' },
    });
  });
});
