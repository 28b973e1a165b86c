import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { pastMs } from '../helpers/history.ts';
import { runCli } from '../helpers/processes.ts';
import { fillDisk, tmpfsFolder, unmountTmpfs } from '../helpers/tmpfs.ts';

// Session 29, F5 made any shard op's full disk answer STORAGE_FULL (a `restore --from-blob` on a
// full disk printed BullMQ's stack trace), checked by a unit test of the op runner alone. Here end
// to end, as an operator meets it (session 30, F6): the data folder on a real tmpfs, filled; the
// real `agentdb restore` in its three kinds (into a new database, from the blob store, in place)
// and `agentdb backup now` against a worker; their exit codes and what they print; and nothing half-restored answering ok
// once room is back, when the same restores work. Each refusal names the full disk (session 38, F19).

const { mnt, refused } = tmpfsFolder('agentdb-restore-full-', '24m', 'restore-full-disk-cli.test.ts');

const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const blobDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-restore-full-blobs-'));
let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  if (refused) return;
  // A folder inside the mount: the sandbox removes its data folder, and a mount point cannot go.
  sb = sandbox({ AGENTDB_DATA_DIR: path.join(mnt, 'data'), BLOB_STORE: 'folder', BLOB_DIR: blobDir, HISTORY_CAPTURE: 'on' });
  await sb.pool();
  client = sb.client();
});
afterAll(async () => {
  if (!refused) {
    await sb.cleanup();
    unmountTmpfs(mnt);
  }
  fs.rmSync(mnt, { recursive: true, force: true });
  fs.rmSync(blobDir, { recursive: true, force: true });
});

const write = (sql: string, params: unknown[] = []) => client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql, params } });
const count = (agent: string) =>
  client.call({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t' } });
const restore = (args: string[]) => runCli(['restore', 'acme/scout', ...args, '--json'], { ...sb.env, LOG_LEVEL: 'silent' });

describe.runIf(!refused)('agentdb restore on a full data disk', () => {
  it('answers STORAGE_FULL with exit 3 (try again later), leaves nothing half-restored, and restores once there is room', { timeout: 120_000 }, async () => {
    expect(await write('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)')).toMatchObject({ ok: true });
    for (let i = 0; i < 40; i++) expect(await write('INSERT INTO t (v) VALUES (?)', ['x'.repeat(1000)])).toMatchObject({ ok: true });
    expect(await runCli(['backup', 'now'], { ...sb.env, LOG_LEVEL: 'silent' })).toMatchObject({ code: 0 });
    const moment = Date.now();
    pastMs(moment);
    const at = new Date(moment).toISOString();
    for (let i = 0; i < 10; i++) expect(await write('INSERT INTO t (v) VALUES (?)', ['y'.repeat(1000)])).toMatchObject({ ok: true });

    const filled = fillDisk(path.join(mnt, 'fill'));
    const kinds = { into: ['--at', at, '--into', 'acme/copy'], blob: ['--from-blob', '--at', at, '--into', 'acme/blobcopy'], inPlace: ['--at', at] };
    try {
      for (const [kind, args] of Object.entries(kinds)) {
        const run = await restore(args);
        expect(run.code, `${kind}: ${run.stdout}${run.stderr}`).toBe(3);
        expect(JSON.parse(run.stdout), kind).toMatchObject({
          error: { code: 'STORAGE_FULL', hint: expect.stringMatching(/^A disk is full: free space on the one the message names/) },
        });
        expect(run.stderr, kind).not.toMatch(/at .*\.js:\d+|Error:/);
        // Which disk, as an operator's restore is told (session 38, F19: from the blob store it said only the generic words).
        expect(JSON.parse(run.stdout).error.message, kind).toMatch(/the disk that holds both the databases and their history \(.*\) is full: free space on it/);
      }
      // A backup's snapshot is taken on the same disk: refused so too, and it says so.
      const backup = await runCli(['backup', 'now'], { ...sb.env, LOG_LEVEL: 'silent' });
      expect(backup.code).toBe(3);
      expect(JSON.parse(backup.stdout)).toMatchObject({ databases: [{ database: 'acme/scout', snapshot: { code: 'STORAGE_FULL' } }] });
      expect(backup.stderr).toMatch(/NO FRESH SNAPSHOT \(STORAGE_FULL/);
    } finally {
      fs.ftruncateSync(filled.fd, 0);
      fs.closeSync(filled.fd);
      fs.rmSync(path.join(mnt, 'fill'));
    }

    // Nothing half-restored: no copy answers rows, and the database restored in place is as it was.
    for (const agent of ['copy', 'blobcopy']) expect(await count(agent), agent).toMatchObject({ ok: false });
    expect(await count('scout')).toMatchObject({ ok: true, result: { rows: [[50]] } });

    // Room back: each restore works, whole.
    for (const [kind, args] of Object.entries(kinds)) expect((await restore(args)).code, kind).toBe(0);
    expect(await count('copy')).toMatchObject({ ok: true, result: { rows: [[40]] } });
    expect(await count('blobcopy')).toMatchObject({ ok: true, result: { rows: [[40]] } });
    expect(await count('scout')).toMatchObject({ ok: true, result: { rows: [[40]] } });
  });
});
