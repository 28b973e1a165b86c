import { statfsSync } from 'node:fs';
import os from 'node:os';
import { describe, expect, it } from 'vitest';

// test/global-setup.ts points TMPDIR at a folder on /dev/shm when it is a tmpfs with room:
// every data folder, own Redis and history the tests make is then spared the disk's fsyncs.
const TMPFS_MAGIC = 0x01021994;

function roomyTmpfs(dir: string): boolean {
  try {
    const st = statfsSync(dir);
    return st.type === TMPFS_MAGIC && st.bavail * st.bsize >= 4 * 1024 ** 3 && st.bavail >= st.blocks / 2;
  } catch {
    return false;
  }
}

describe("the suite's temp folder", () => {
  it('is on /dev/shm when that is a tmpfs with room and TMPDIR was not set before the suite', () => {
    // A TMPDIR of the caller's own is left alone: only one the setup made is checked.
    const callers = process.env.TMPDIR !== undefined && !process.env.TMPDIR.startsWith('/dev/shm/agentdb-tests-');
    if (!roomyTmpfs('/dev/shm') || callers) return;
    expect(os.tmpdir()).toMatch(/^\/dev\/shm\/agentdb-tests-/);
  });
});
