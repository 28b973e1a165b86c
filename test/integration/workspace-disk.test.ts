import { existsSync, linkSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';

// What a workspace's disk quota counts, on real files: its databases on every shard with their
// -wal and -shm, its history (a file linked twice, as a fork's first snapshot is its source's,
// once), and nothing of another workspace.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-wsdisk-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function file(rel: string, bytes: number): string {
  const p = path.join(dataDir, rel);
  mkdirSync(path.dirname(p), { recursive: true });
  writeFileSync(p, Buffer.alloc(bytes));
  return p;
}

file('shards/0/acme/scout.sqlite', 4096);
file('shards/0/acme/scout.sqlite-wal', 1000);
file('shards/0/acme/scout.sqlite-shm', 32768);
file('shards/3/acme/_workspace.sqlite', 8192);
file('shards/1/acme/fork1.sqlite', 4096);
file('shards/1/other/scout.sqlite', 1_000_000);
const snap = file('history/acme/scout/generations/g0000000001/snapshot.sqlite', 4096);
mkdirSync(path.join(dataDir, 'history/acme/fork1/generations/g0000000001'), { recursive: true });
linkSync(snap, path.join(dataDir, 'history/acme/fork1/generations/g0000000001/snapshot.sqlite'));
file('history/acme/fork1/generations/g0000000001/segments/00000001.wal', 500);
file('history/other/scout/generations/g0000000001/snapshot.sqlite', 1_000_000);
// The call-id ledger of acme, which grows with each call sent with its own id (fault review of issue 25).
file('call-ids/acme.sqlite', 12_288);
file('call-ids/acme.sqlite-wal', 700);
file('call-ids/other.sqlite', 1_000_000);
// A past moment kept for a read's as_of (issue 29), and another workspace's.
file('as-of/acme/scout/g0000000001.00000001.5.sqlite', 3_000);
file('as-of/other/scout/g0000000001.snapshot.sqlite', 1_000_000);

describe("a workspace's disk use", () => {
  it('counts its databases on every shard, their files, and its history with each linked file once', () => {
    expect(workspaceDiskUse(dataDir, 'acme')).toEqual({
      databases: ['acme', 'acme/fork1', 'acme/scout'],
      databaseBytes: 4096 + 1000 + 32768 + 8192 + 4096,
      historyBytes: 4096 + 500,
      ledgerBytes: 12_288 + 700,
      momentBytes: 3_000,
    });
    expect(workspaceDiskUse(dataDir, 'nobody')).toEqual({ databases: [], databaseBytes: 0, historyBytes: 0, ledgerBytes: 0, momentBytes: 0 });
  });

  it('adds the offloaded results and refuses past the byte quota, naming it, and tells who counts refusals', async () => {
    const refused: string[] = [];
    const quota = new WorkspaceQuota({
      dataDir,
      overrides: { maxBytes: 73_000 },
      planOf: async () => 'pro',
      offloadedBytes: async () => 2_000,
      onRefused: (ws) => refused.push(ws),
    });
    const u = await quota.usage('acme');
    expect(u).toMatchObject({
      plan: 'pro',
      limits: { maxDatabases: 1000, maxBytes: 73_000 },
      offloadedBytes: 2_000,
      momentBytes: 3_000,
      bytes: 50_152 + 4_596 + 12_988 + 2_000 + 3_000,
    });
    // Past the quota with the kept moment, within it without: the moment is dropped for the room.
    await expect(quota.check('acme', { databases: 1, bytes: 1_000 }, 'a fork')).resolves.toBeUndefined();
    expect(existsSync(path.join(dataDir, 'as-of/acme'))).toBe(false);
    expect(existsSync(path.join(dataDir, 'as-of/other/scout/g0000000001.snapshot.sqlite'))).toBe(true);
    expect(refused).toEqual([]);
    const err = await quota.check('acme', { databases: 1, bytes: 5_000 }, 'restore of acme/scout into acme/fork2').catch((e: unknown) => e);
    expect(codeOf(err)).toBe('QUOTA_EXCEEDED');
    expect((err as { detail: string }).detail).toBe(
      'restore of acme/scout into acme/fork2 refused: workspace acme holds 69736 bytes on disk and this would add about 5000, its quota is 73000 (WORKSPACE_MAX_BYTES or its plan); dropping tables or deleting rows frees none of it (the file keeps its pages, history its commits): room comes back as history older than HISTORY_RETENTION_DAYS is pruned, or with a larger plan (agentdb workspaces set --plan) or WORKSPACE_MAX_BYTES',
    );
    expect(refused).toEqual(['acme']);
  });
});
