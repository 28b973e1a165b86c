import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// Issue 27 part 5: the hostile review forked one database ten times and filled the disk. With a
// small quota (5 databases), forks past it are refused with QUOTA_EXCEEDED, a new agent's first
// write too, another workspace notices nothing, and `agentdb usage` shows the figures.
let sb: Sandbox;
let worker: ChildProcess;
let client: AgentDbClient;
const settings = { database: 'agent' as const };

beforeAll(async () => {
  sb = sandbox({ WORKSPACE_MAX_DATABASES: '5' });
  worker = await startCli(['worker'], sb.env);
  client = sb.client();
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

const write = (workspace: string, agent: string, sql: string) => client.call({ workspace, agent, settings, tool: 'DATA_WRITE_SQL', arguments: { sql } });

describe('disk quotas by plan', () => {
  it('refuses forks past the databases quota with QUOTA_EXCEEDED, and the first write of a new database', async () => {
    expect(await write('acme', 'scout', "CREATE TABLE t AS SELECT printf('%.1000c', 'x') AS s")).toMatchObject({ ok: true });
    const at = String(Date.now() / 1000);
    const outcomes: { code: number; error?: { code: string; message: string; hint: string } }[] = [];
    for (let n = 1; n <= 10; n++) {
      const out = await runCli(['restore', 'acme/scout', '--at', at, '--into', `acme/fork${n}`], sb.env);
      outcomes.push({ code: out.code ?? -1, ...(out.code === 0 ? {} : { error: JSON.parse(out.stdout).error }) });
    }
    // acme/scout and four forks make five databases: the fifth fork and every later one are refused.
    expect(outcomes.slice(0, 4).map((o) => o.code)).toEqual([0, 0, 0, 0]);
    for (const o of outcomes.slice(4)) {
      expect(o.code).toBe(1);
      expect(o.error).toMatchObject({ code: 'QUOTA_EXCEEDED', hint: expect.stringContaining('agentdb usage') });
      expect(o.error!.message).toMatch(/workspace acme holds 5 databases, its quota is 5 \(WORKSPACE_MAX_DATABASES/);
    }

    const first = await write('acme', 'newcomer', 'CREATE TABLE t (x)');
    expect(first).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    // The databases already made keep working, and another workspace is not touched.
    expect(await write('acme', 'fork1', 'INSERT INTO t VALUES (1)')).toMatchObject({ ok: true });
    expect(await write('other', 'scout', 'CREATE TABLE t (x)')).toMatchObject({ ok: true });
  });

  it('agentdb usage shows the databases and the bytes against the plan', async () => {
    const out = await runCli(['usage', '--workspace', 'acme', '--json'], sb.env);
    expect(out.code, out.stderr).toBe(0);
    const { disk } = JSON.parse(out.stdout);
    expect(disk).toMatchObject({
      workspace: 'acme',
      plan: 'pro',
      limits: { maxDatabases: 5, maxBytes: 5 * 1024 ** 3 },
      databases: ['acme/fork1', 'acme/fork2', 'acme/fork3', 'acme/fork4', 'acme/scout'],
      offloadedBytes: 0,
    });
    expect(disk.databaseBytes).toBeGreaterThan(5 * 4096);
    expect(disk.historyBytes).toBeGreaterThan(0);
    expect(disk.bytes).toBe(disk.databaseBytes + disk.historyBytes);
    const text = await runCli(['usage', '--workspace', 'acme'], sb.env);
    // Each limit says where it comes from: a quota set only for the workers would show as the plan's.
    expect(text.stdout).toContain('databases: 5 of 5 (100%, WORKSPACE_MAX_DATABASES)');
    expect(text.stdout).toMatch(
      /^disk bytes: \d+ of 5368709120 \(\d+%, plan pro; WORKSPACE_MAX_BYTES not set for this command\): files \d+, history \d+, call-id ledger \d+, offloaded results 0, past moments kept for as_of 0$/m,
    );
    // The Redis budget binds where calls are enqueued (the server's, each client's own): its line says
    // so the same way, or a budget set only for the server reads as the plan's here.
    expect(text.stdout).toMatch(/^redis: \d+ of 134217728 bytes \(plan pro; REDIS_BYTES_PER_WORKSPACE not set for this command\)$/m);
  });
});
