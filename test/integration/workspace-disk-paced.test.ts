import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { WALK_ENTRIES_PER_TURN, workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';

// Review L2: the byte quota's walk of a workspace's folder (every 5 s per writing workspace in
// the worker) ran in one go: a workspace of many thousand files held the worker's event loop,
// and every other workspace's calls on it, for the whole walk.
const FILES = 20_000;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-paced-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

for (let g = 0; g < 20; g++) {
  const dir = path.join(dataDir, 'history/acme/scout/generations', `g${String(g).padStart(10, '0')}`, 'segments');
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < FILES / 20; i++) writeFileSync(path.join(dir, `${String(i).padStart(8, '0')}.wal`), 'x'.repeat(10));
}
mkdirSync(path.join(dataDir, 'shards/0/acme'), { recursive: true });
writeFileSync(path.join(dataDir, 'shards/0/acme/scout.sqlite'), Buffer.alloc(4096));

describe("the byte quota's walk of a workspace of 20,000 files", () => {
  it("lets the worker's event loop turn while it walks, and counts what a walk in one go counts", async () => {
    const quota = new WorkspaceQuota({ dataDir, overrides: { maxBytes: 1_000_000 }, planOf: async () => 'pro' });
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    // Other work of the worker: a turn of the loop each, counted while the walk runs.
    let turns = 0;
    let walking = true;
    const other = () => {
      turns++;
      if (walking) setImmediate(other);
    };
    setImmediate(other);
    const usage = await quota.usage('acme');
    walking = false;
    delay.disable();
    expect(usage).toMatchObject({ databases: ['acme/scout'], databaseBytes: 4096, historyBytes: FILES * 10, bytes: 4096 + FILES * 10 });
    expect(usage).toMatchObject(workspaceDiskUse(dataDir, 'acme'));
    // One turn at least per WALK_ENTRIES_PER_TURN entries (files and folders); in one go, none.
    expect(turns).toBeGreaterThanOrEqual(Math.floor(FILES / WALK_ENTRIES_PER_TURN));
    console.log(
      `walk of ${FILES} files: ${turns} turns of the loop, longest delay ${(delay.max / 1e6).toFixed(1)} ms, mean ${(delay.mean / 1e6).toFixed(2)} ms`,
    );
  });
});
