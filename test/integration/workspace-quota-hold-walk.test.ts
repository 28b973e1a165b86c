import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WALK_ENTRIES_PER_TURN, workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';

// Hostile review T5 (session 28): a step's room is held while it builds (`WorkspaceQuota.hold`),
// and the walk a later step checks with is paced (the event loop turns every 128 entries). A
// step that wrote its bytes and released its hold while the later step's walk was past the
// folder it wrote into was counted by neither: not on disk as walked, no longer held. Two
// restores of a workspace at once each passed, together past the quota by the first one's size.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-hold-walk-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

// History of a few turns of the walk: the shards' folders are walked first, history after.
const historyDir = path.join(dataDir, 'history/acme/scout/generations/g0000000001/segments');
mkdirSync(historyDir, { recursive: true });
for (let i = 0; i < WALK_ENTRIES_PER_TURN * 4; i++) writeFileSync(path.join(historyDir, `${String(i).padStart(8, '0')}.wal`), 'x');
mkdirSync(path.join(dataDir, 'shards/0/acme'), { recursive: true });
writeFileSync(path.join(dataDir, 'shards/0/acme/scout.sqlite'), Buffer.alloc(4096));

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('WorkspaceQuota.hold against a paced walk', () => {
  it('counts a step that finished and released while the walk was under way: one of two that fit alone is refused', async () => {
    const base = workspaceDiskUse(dataDir, 'acme');
    const baseBytes = base.databaseBytes + base.historyBytes;
    const adds = 600_000;
    const quota = new WorkspaceQuota({ dataDir, overrides: { maxBytes: baseBytes + adds + adds / 2 }, planOf: async () => 'pro' });
    const first = await quota.hold('acme', { databases: 1, bytes: adds }, 'restore of acme/scout into acme/copy1');
    const second = quota.hold('acme', { databases: 1, bytes: adds }, 'restore of acme/scout into acme/copy2');
    // The second step's walk has passed the shards' folders (one turn of the loop in): the first
    // lands its database there and lets go of its room.
    await turn();
    writeFileSync(path.join(dataDir, 'shards/0/acme/copy1.sqlite'), Buffer.alloc(adds));
    first();
    await expect(second).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' });
    // The next step's walk sees the first one's file: still refused, and by the walk alone.
    await expect(quota.hold('acme', { databases: 1, bytes: adds }, 'restore of acme/scout into acme/copy3')).rejects.toMatchObject({
      code: 'QUOTA_EXCEEDED',
    });
  });
});
