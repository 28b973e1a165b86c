import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBackups } from '../../src/shards/backups.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// `agentdb backup now` on a full disk answered INTERNAL ("agentdb failed on its own account …
// Report the call id") for an ENOSPC: the remedy is the operator's, to free space, and the backup
// then works again. Here the folder blob store is on a small tmpfs of the test's own, filled up.
const DB = 'acme/scout';
const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-backup-full-'));
const refused = mountTmpfs(mnt);
if (refused) {
  fs.rmSync(mnt, { recursive: true, force: true });
  console.warn(`backup-disk-full.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
}

function mountTmpfs(dir: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return String((err as { stderr?: Buffer }).stderr ?? err).trim() || String(err);
  }
}

/** Writes zeros into `file` until the disk under it has no room left. */
function fill(file: string): void {
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
}

describe.runIf(!refused)('backup now on a full disk', () => {
  let sb: Sandbox;
  let ops: ShardOpClient;

  beforeAll(async () => {
    sb = sandbox({ BLOB_STORE: 'folder', BLOB_DIR: mnt, HISTORY_CAPTURE: 'on' });
    await sb.pool();
    const client = sb.client();
    ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
    for (const sql of ['CREATE TABLE t (v TEXT)', "INSERT INTO t VALUES ('a'), ('b')"]) {
      const env = await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
      expect(env.ok, JSON.stringify(env)).toBe(true);
    }
  });

  afterAll(async () => {
    await ops?.close();
    await sb?.cleanup();
    execFileSync('umount', [mnt]);
    fs.rmSync(mnt, { recursive: true, force: true });
  });

  it('answers STORAGE_FULL (retryable), not INTERNAL, and backs up once there is room again', async () => {
    fill(path.join(mnt, 'filler'));
    const full = await runBackups(ops, sb.config.shardCount, { db: DB, reason: 'manual' });
    expect(full.databases).toMatchObject([{ database: DB, files: 0, error: { code: 'STORAGE_FULL', detail: expect.stringContaining('ENOSPC') } }]);

    fs.rmSync(path.join(mnt, 'filler'));
    const after = await runBackups(ops, sb.config.shardCount, { db: DB, reason: 'manual' });
    expect(after.databases[0]!.error, JSON.stringify(after.databases[0])).toBeUndefined();
    expect(after.databases[0]!.files).toBeGreaterThan(0);
  }, 60_000);
});
