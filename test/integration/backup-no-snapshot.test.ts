import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { historyDir } from '../../src/history/history-files.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli } from '../helpers/processes.ts';
import { fillDisk, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// Fault review F2 (session 27): `agentdb backup now` while the disk that holds the history was
// full answered every database `unchanged` and exited 0. Its fresh snapshot (which closes the
// segment capture appends to, so the backup reaches now) could not be written, and only the
// worker's log said so: the commits since the last closed segment were in no backup, and the
// operator was told all was well. Here the database's history folder is a small tmpfs, filled.

const DB = 'acme/scout';
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const sb: Sandbox = sandbox({ BLOB_STORE: 'folder', HISTORY_CAPTURE: 'on' });
const mnt = historyDir(sb.dataDir, DB);
fs.mkdirSync(mnt, { recursive: true });
const refused = mountTmpfs(mnt, '2m');
if (refused) console.warn(`backup-no-snapshot.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);

describe.runIf(!refused)('backup now while the history disk is full', () => {
  const write = async (sql: string) => {
    const env = await sb.client().call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql } });
    expect(env.ok, JSON.stringify(env)).toBe(true);
  };
  const backup = async () => {
    const run = await runCli(['backup', 'now', '--db', DB], sb.env);
    return {
      code: run.code,
      stderr: run.stderr,
      report: (JSON.parse(run.stdout) as { databases: { database: string; snapshot?: { code: string } }[] }).databases[0]!,
    };
  };

  beforeAll(async () => {
    await sb.pool();
    await write('CREATE TABLE t (v TEXT)');
    await write("INSERT INTO t VALUES ('before')");
  });

  afterAll(async () => {
    await sb.cleanup().catch(() => undefined);
    if (!refused) unmountTmpfs(mnt);
    fs.rmSync(sb.dataDir, { recursive: true, force: true });
  });

  it('says no fresh snapshot was taken and exits 3 (STORAGE_FULL: try again later), then backs up to now once there is room', async () => {
    expect(await backup()).toMatchObject({ code: 0, report: { database: DB } });
    const filled = fillDisk(`${mnt}/fill`);
    // Answered ok: its frames wait in the WAL until history has room again.
    await write("INSERT INTO t VALUES ('while full')");
    const full = await backup();
    expect(full.code, full.stderr).toBe(3);
    expect(full.report).toMatchObject({ database: DB, snapshot: { code: 'STORAGE_FULL' } });
    expect(full.stderr).toContain('NO FRESH SNAPSHOT');

    fs.ftruncateSync(filled.fd, 0);
    fs.closeSync(filled.fd);
    const after = await backup();
    expect(after.code, after.stderr).toBe(0);
    expect(after.report.snapshot).toBeUndefined();
  }, 60_000);
});
