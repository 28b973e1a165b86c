import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

let sb: Sandbox;
let worker: ChildProcess;

beforeAll(async () => {
  sb = sandbox({ MAX_RESULT_BYTES: '4096' });
  worker = await startCli(['worker'], sb.env);
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

const who = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}'];

describe('agentdb result-blob', () => {
  it('prints an offloaded result whole, or to --out; another workspace or agent finds nothing', async () => {
    expect((await runCli(['call', ...who, 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE t (s TEXT)"}'], sb.env)).code).toBe(0);
    const q = await runCli(
      [
        'call',
        ...who,
        'DATA_QUERY_SQL',
        JSON.stringify({
          sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) SELECT i, printf('%.80c', 'z') AS z FROM n",
          max_rows: 1000,
        }),
      ],
      sb.env,
    );
    const env = JSON.parse(q.stdout);
    expect(env.result.offloaded).toMatchObject({ rows: 300 });
    const id = env.result.offloaded.id as string;
    const expected = { columns: ['i', 'z'], rows: Array.from({ length: 300 }, (_, k) => [k + 1, 'z'.repeat(80)]) };

    const whole = await runCli(['result-blob', id, '--workspace', 'acme'], sb.env);
    expect(whole.code).toBe(0);
    expect(JSON.parse(whole.stdout)).toEqual(expected);
    const out = path.join(sb.dataDir, 'out.json');
    expect((await runCli(['result-blob', id, '--workspace', 'acme', '--agent', 'scout', '--out', out], sb.env)).code).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(expected);
    // An --out that cannot be written is a bad command line (exit 2), said before anything is fetched.
    const [noFolder, aFolder] = await Promise.all([
      runCli(['result-blob', id, '--workspace', 'acme', '--out', path.join(sb.dataDir, 'nowhere', 'x.json')], sb.env),
      runCli(['result-blob', id, '--workspace', 'acme', '--out', sb.dataDir], sb.env),
    ]);
    expect([noFolder.code, aFolder.code]).toEqual([2, 2]);
    expect(noFolder.stderr).toContain('does not exist');
    expect(aFolder.stderr).toContain('is a folder');
    expect(noFolder.stderr + aFolder.stderr).not.toMatch(/\n\s+at /);

    for (const args of [
      ['--workspace', 'other'],
      ['--workspace', 'acme', '--agent', 'someone'],
    ]) {
      const none = await runCli(['result-blob', id, ...args], sb.env);
      expect(none.code).toBe(1);
      // `{"error":…}` on stdout as every command answers a refusal (review N10: it was text on
      // stderr, so a script reading stdout got nothing to parse).
      const { error } = JSON.parse(none.stdout) as { error: { code: string; message: string; hint: string } };
      expect(error.code).toBe('NOT_FOUND');
      // Where it looked, since a store other than the deployment's is the other usual cause.
      expect(error.message).toContain(`(looked in folder:${path.join(sb.dataDir, 'blobs')})`);
      expect(error.hint).toContain('BLOB_DIR');
      expect(none.stderr).toBe('');
    }
  });
});

describe('agentdb backup now and restore --from-blob', () => {
  it('backs up every shard, a line per database on stderr, and prints the run as JSON', async () => {
    const run = await runCli(['backup', 'now'], sb.env);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ databases: [expect.objectContaining({ database: 'acme/scout', unchanged: false })], failed: [] });
    expect(run.stderr).toMatch(/^shard \d+ 1\/1 acme\/scout: \d+ files, [\d.]+ MB uploaded and verified$/m);
    // The snapshot it began says it was asked for, not a nightly one.
    expect(listGenerations(localSource(sb.config.dataDir, 'acme/scout')).at(-1)!.snapshot!.reason).toBe('manual');
    const again = await runCli(['backup', 'now', '--db', 'acme/scout'], sb.env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ databases: [expect.objectContaining({ database: 'acme/scout', unchanged: true })], failed: [] });
    // A line for the database even when its op ended before its progress event was read.
    expect(again.stderr).toMatch(/^shard \d+ 1\/1 acme\/scout: unchanged$/m);
    // What restoring the backup beside the live database would do, changing nothing.
    const dry = await runCli(['restore', 'acme/scout', '--from-blob', '--into', 'acme/scout-copy', '--dry-run', '--json'], sb.env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ database: 'acme/scout', into: 'acme/scout-copy', dryRun: true, commits: expect.any(Number) });
    expect(existsSync(databasePath(sb.config.dataDir, 'acme', 'scout-copy', shardOf('acme/scout-copy', sb.config.shardCount)))).toBe(false);
    // Previewed where the database still is: the plan, and why the restore itself is refused.
    const here = await runCli(['restore', 'acme/scout', '--from-blob', '--dry-run', '--json'], sb.env);
    expect(here.code, here.stdout).toBe(0);
    expect(JSON.parse(here.stdout)).toMatchObject({
      database: 'acme/scout',
      dryRun: true,
      commits: expect.any(Number),
      refused: expect.stringMatching(/^DATABASE_EXISTS: .*--into acme\/NEW\b/),
    });
    // Without --json, lines for a person, as the other restores print (it printed JSON alone).
    const hereText = await runCli(['restore', 'acme/scout', '--from-blob', '--dry-run'], sb.env);
    expect(hereText.code, hereText.stdout).toBe(0);
    expect(hereText.stdout).toMatch(
      /^dry run, nothing changed: acme\/scout would be restored from its backup in the blob store as of \S+ \((the last commit kept|when its snapshot was taken)\)\nbuilt from snapshot \S+ \(taken \S+\)( and the \d+ commits? after it| alone)\nthe restore itself would be refused: DATABASE_EXISTS: .*--into acme\/NEW\b.*\n$/,
    );
    const copy = await runCli(['restore', 'acme/scout', '--from-blob', '--into', 'acme/scout-backup'], sb.env);
    expect(copy.code, copy.stdout + copy.stderr).toBe(0);
    expect(copy.stdout).toMatch(
      /^made acme\/scout-backup from acme\/scout's backup in the blob store as of \S+ \((the last commit kept|when its snapshot was taken)\)\nbuilt from snapshot \S+ \(taken \S+\)( and the \d+ commits? after it| alone); \d+ bytes downloaded and verified\n$/,
    );
    const refused = await runCli(['restore', 'acme/scout', '--from-blob'], sb.env);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: 'DATABASE_EXISTS' } });
  });

  it('refuses a malformed database id before doing anything', async () => {
    const bad = await runCli(['backup', 'now', '--db', '../etc'], sb.env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--db must be a database id');
    expect((await runCli(['restore', 'Not/Valid', '--from-blob'], sb.env)).code).toBe(2);
    expect((await runCli(['restore', 'acme/scout', '--from-blob', '--at', 'yesterday'], sb.env)).code).toBe(2);
  });

  it('answers a database with no backup with a clear code', async () => {
    const none = await runCli(['restore', 'acme/nobody', '--from-blob'], sb.env);
    expect(none.code).toBe(1);
    expect(JSON.parse(none.stdout)).toMatchObject({ error: { code: 'NOT_FOUND', message: expect.stringMatching(/has no backup of acme\/nobody/) } });
    expect((await runCli(['restore', 'acme/scout', '--from-blob', '--undo', 'u1'], sb.env)).code).toBe(2);
    // `backup now` of a database with nothing to back up answers as `restore` does: JSON on stdout.
    const ghost = await runCli(['backup', 'now', '--db', 'acme/ghost'], sb.env);
    expect(ghost.code).toBe(1);
    expect(JSON.parse(ghost.stdout)).toMatchObject({ error: { code: 'NOT_FOUND', message: expect.stringContaining('acme/ghost'), hint: expect.any(String) } });
  });

  it("scheduler --prune-now prunes this machine's history as well, and says what it removed", async () => {
    const run = await runCli(['scheduler', '--prune-now'], sb.env);
    expect(run.code, run.stderr).toBe(0);
    // Nothing here is past the retention: acme/scout's history is looked at and kept.
    expect(JSON.parse(run.stdout)).toMatchObject({ backups: 0, history: { databases: expect.any(Number), generations: 0, undoPoints: 0, bytes: 0 } });
    expect(JSON.parse(run.stdout).history.databases).toBeGreaterThanOrEqual(1);
    expect(listGenerations(localSource(sb.config.dataDir, 'acme/scout')).length).toBeGreaterThanOrEqual(1);
  });
});
