import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Moments for `as_of` reads are built after asking the quota for their room. Asked at once,
// each saw the same usage and all passed, together past the quota (review 19, H29 finding 8):
// the room is held while a moment builds, and a step asked meanwhile counts it.

let sb: Sandbox;
beforeAll(() => {
  sb = sandbox();
});
afterAll(async () => {
  await sb.cleanup();
});

describe('WorkspaceQuota.hold', () => {
  it('counts the room other steps hold while they build: of two at once that fit alone, one is refused, until the other releases', async () => {
    const quota = new WorkspaceQuota({ dataDir: sb.config.dataDir, overrides: { maxBytes: 1000 }, planOf: async () => 'pro' });
    const what = 'reading acme as of a past moment';
    const both = await Promise.allSettled([quota.hold('acme', { databases: 0, bytes: 600 }, what), quota.hold('acme', { databases: 0, bytes: 600 }, what)]);
    const held = both.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<() => void>[];
    const refused = both.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    expect(held).toHaveLength(1);
    expect(refused.map((r) => r.reason.code)).toEqual(['QUOTA_EXCEEDED']);
    // Another workspace holds nothing of acme's.
    (await quota.hold('other', { databases: 0, bytes: 600 }, what))();
    await expect(quota.hold('acme', { databases: 0, bytes: 600 }, what)).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' });
    held[0]!.value();
    const again = await quota.hold('acme', { databases: 0, bytes: 600 }, what);
    again();
  });
});
