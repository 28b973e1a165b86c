import type { ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort } from '../helpers/own-redis.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// Issue 27 part 6, as an operator sees it: `GET /metrics` (behind METRICS_TOKEN), `agentdb
// backups`, and the disaster restore of every database with `restore --from-blob --all`.
const TOKEN = 'metrics-token-0123456789';
let sb: Sandbox;
let app: ChildProcess;
let port: number;

beforeAll(async () => {
  port = await freePort();
  sb = sandbox({ METRICS_TOKEN: TOKEN, PORT: String(port) });
  app = await startCli(['start'], sb.env);
});
afterAll(async () => {
  await stop(app);
  await sb.cleanup();
});

const cli = (...args: string[]) => runCli(args, sb.env);
const call = (workspace: string, agent: string, tool: string, args: object) =>
  cli('call', '--workspace', workspace, '--agent', agent, '--settings', '{"database":"agent"}', tool, JSON.stringify(args));
const scrape = async (token = TOKEN) => fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${token}` } });

describe('GET /metrics', () => {
  it('counts calls by tool and outcome and shows the queues, executors, Redis and disk; only with the token', async () => {
    for (const [ws, agent] of [
      ['acme', 'scout'],
      ['acme', 'lead'],
      ['other', 'x'],
    ] as const) {
      expect((await call(ws, agent, 'DATA_WRITE_SQL', { sql: 'CREATE TABLE t (n INTEGER)' })).code).toBe(0);
      expect((await call(ws, agent, 'DATA_WRITE_SQL', { sql: 'INSERT INTO t VALUES (7)' })).code).toBe(0);
    }
    expect((await call('acme', 'scout', 'DATA_QUERY_SQL', { sql: 'SELECT nope FROM t' })).code).toBe(1);

    const denied = await scrape('wrong-token-wrong-token');
    expect(denied.status).toBe(401);
    expect(await denied.json()).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(401);

    const res = await scrape();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('agentdb_calls_total{tool="DATA_WRITE_SQL",outcome="ok"} 6');
    expect(text).toContain('agentdb_calls_total{tool="DATA_QUERY_SQL",outcome="SQL_ERROR"} 1');
    expect(text).toMatch(/^agentdb_call_duration_seconds_count\{tool="DATA_WRITE_SQL"\} 6$/m);
    expect(text).toMatch(/^agentdb_queue_jobs\{shard="0",state="waiting"\} 0$/m);
    expect(text).toMatch(/^agentdb_approvals_pending 0$/m);
    expect(text).toMatch(/^agentdb_executor_children\{state="idle"\} \d+$/m);
    expect(text).toMatch(/^agentdb_executor_waiting_statements 0$/m);
    expect(text).toMatch(/^agentdb_owned_shards 4$/m);
    expect(text).toMatch(/^agentdb_redis_used_memory_bytes \d+$/m);
    expect(text).toMatch(/^agentdb_disk_bytes\{kind="free"\} \d+$/m);
    expect(text).toContain('# TYPE agentdb_quota_refusals_total counter');
  });
});

describe('agentdb backups', () => {
  it('shows the schedule, each shard never run, then each run and what the blob store holds', async () => {
    const before = await cli('backups', '--json');
    expect(before.code, before.stderr).toBe(0);
    const b = JSON.parse(before.stdout);
    expect(b.schedule).toMatchObject({ cron: sb.config.backupCron, tz: sb.config.backupTz, next: expect.any(String) });
    expect(b.shards).toEqual([0, 1, 2, 3].map((shard) => ({ shard })));

    expect((await cli('backup', 'now')).code).toBe(0);
    const after = await cli('backups', '--json');
    expect(after.code, after.stderr).toBe(0);
    const a = JSON.parse(after.stdout);
    for (const s of a.shards) expect(s).toMatchObject({ last: { reason: 'manual', failedDatabases: 0 }, lastOk: expect.any(Object) });
    expect(a.shards.reduce((n: number, s: { last: { databases: number } }) => n + s.last.databases, 0)).toBe(3);
    expect(a.store.databases.map((d: { database: string }) => d.database)).toEqual(['acme/lead', 'acme/scout', 'other/x']);
    for (const d of a.store.databases) expect(d).toMatchObject({ manifest: true, objects: expect.any(Number), bytes: expect.any(Number) });
    expect(a).toMatchObject({ failing: [], never: [] });

    const text = await cli('backups');
    expect(text.stdout).toMatch(/^schedule: ".+" in \S+ \(BACKUP_CRON, BACKUP_TZ\); next run \d{4}-/);
    expect(text.stdout).toMatch(/^0\t\S+Z\tmanual\tok: \d+ databases, [\d.]+ MB uploaded\t\S+Z$/m);
    expect(text.stdout).toContain('blob store folder:');
    expect(text.stdout).toMatch(/^acme\/scout\t\d+\t[\d.]+ MB\t\S+\t\S+\tyes$/m);

    const metrics = await (await scrape()).text();
    for (const shard of [0, 1, 2, 3]) expect(metrics).toMatch(new RegExp(`^agentdb_backup_last_success_timestamp_seconds\\{shard="${shard}"\\} \\d+`, 'm'));
    expect(metrics).toMatch(/^agentdb_backup_last_run_failed\{shard="0"\} 0$/m);
  });
});

describe('agentdb restore --from-blob --all', () => {
  it('restores every database missing here, a line each and a total, exit 1 when one failed; run again, it skips what exists', async () => {
    // The disaster: the data folder's databases and history are gone, the blob store is not.
    await stop(app);
    rmSync(path.join(sb.dataDir, 'shards'), { recursive: true, force: true });
    rmSync(path.join(sb.dataDir, 'history'), { recursive: true, force: true });
    // And one backup is damaged: its manifest no longer matches its sha256.
    writeFileSync(path.join(sb.dataDir, 'blobs', 'backups', 'acme', 'lead', 'manifest.json'), '{"damaged":true}');
    app = await startCli(['start'], sb.env);

    const usage = await cli('restore', '--all');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('add --from-blob');

    const one = await cli('restore', '--from-blob', '--workspace', 'other');
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/^other\/x: restored to \S+ \(\d+ commits, \d+ bytes downloaded\)$/m);
    expect(one.stdout).toMatch(
      /^total: 1 database of workspace other with a backup in the blob store \(folder:.+\): 1 restored, 0 skipped \(they exist here\), 0 failed$/m,
    );

    const all = await cli('restore', '--from-blob', '--all');
    expect(all.code).toBe(1);
    expect(all.stdout).toMatch(/^acme\/scout: restored to /m);
    expect(all.stdout).toMatch(/^acme\/lead: FAILED HISTORY_CORRUPT: /m);
    expect(all.stdout).toMatch(/^other\/x: skipped, it exists here$/m);
    expect(all.stdout).toMatch(/^total: 3 databases .*: 1 restored, 1 skipped \(they exist here\), 1 failed$/m);

    const read = await call('acme', 'scout', 'DATA_QUERY_SQL', { sql: 'SELECT n FROM t' });
    expect(JSON.parse(read.stdout)).toMatchObject({ ok: true, result: { rows: [[7]] } });

    const again = await cli('restore', '--from-blob', '--all', '--json');
    const lines = again.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.at(-1)).toMatchObject({ total: { databases: 3, restored: 0, skipped: 2, failed: 1 } });
    expect(lines.find((l) => l.database === 'acme/lead')).toMatchObject({ outcome: 'failed', error: { code: 'HISTORY_CORRUPT', hint: expect.any(String) } });
  });
});
