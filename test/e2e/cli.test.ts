import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

let sb: Sandbox;
let worker: ChildProcess;

beforeAll(async () => {
  sb = sandbox();
  worker = await startCli(['worker'], sb.env);
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

const who = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}'];
const lines = (s: string) =>
  s
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('agentdb call', () => {
  it('prints one envelope line and exits 0 when the call succeeds', async () => {
    const made = await runCli(['call', ...who, 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE t (x INTEGER)"}'], sb.env);
    expect(made.code).toBe(0);
    expect(lines(made.stdout)).toEqual([expect.objectContaining({ ok: true, tool: 'DATA_WRITE_SQL', credits: 2 })]);
    const q = await runCli(['call', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT count(*) AS n FROM t"}'], sb.env);
    expect(lines(q.stdout)[0]).toMatchObject({ ok: true, untrusted: true, result: { columns: ['n'], rows: [[0]] } });
  });

  it('exits with a coded envelope: 2 for an unknown tool (a bad command line), 1 for a refusal', async () => {
    const unknown = await runCli(['call', ...who, 'DATA_NUKE', '{}'], sb.env);
    expect(lines(unknown.stdout)[0]).toMatchObject({ ok: false, tool: 'DATA_NUKE', error: { code: 'UNKNOWN_TOOL' } });
    expect(unknown.code).toBe(2);
    const refused = await runCli(['call', ...who, 'DATA_QUERY_SQL', '{"sql":"ATTACH \'x\' AS y"}'], sb.env);
    expect(refused.code).toBe(1);
    expect(lines(refused.stdout)[0]).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
  });

  it('runs a batch from stdin and from a file, one envelope per line, in order', async () => {
    const batch = [
      { workspace: 'acme', agent: 'b1', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE k (v)' } },
      { workspace: 'acme', agent: 'b1', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO k VALUES (?)', params: [41] } },
      'not json',
      { workspace: '../x', agent: 'b1', tool: 'DATA_DESCRIBE_SCHEMA' },
      ...Array.from({ length: 30 }, (_, i) => ({
        workspace: 'acme',
        agent: `b${i % 7}`,
        settings: { database: 'agent' },
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: 'SELECT ? AS i', params: [i] },
      })),
    ].map((l) => (typeof l === 'string' ? l : JSON.stringify(l)));
    const out = await runCli(['call', '--batch', '-'], sb.env, `${batch.join('\n')}\n`);
    expect(out.code).toBe(1);
    const env = lines(out.stdout);
    expect(env).toHaveLength(34);
    expect(env[0]).toMatchObject({ ok: true });
    expect(env[1]).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(env[2]).toMatchObject({ ok: false, line: 3, error: { code: 'INVALID_ARGUMENTS' } });
    expect(env[2].callId).toBeUndefined();
    expect(out.stderr).toMatch(/^agentdb call: --batch line 3: not valid JSON/m);
    expect(env[3]).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
    expect(env.slice(4).map((e) => e.result.rows[0][0])).toEqual(Array.from({ length: 30 }, (_, i) => i));

    const file = path.join(sb.dataDir, 'batch.jsonl');
    writeFileSync(file, `${batch[1]}\n${batch[4]}\n`);
    const fromFile = await runCli(['call', '--batch', file], sb.env);
    expect(fromFile.code).toBe(0);
    expect(lines(fromFile.stdout).map((e) => e.ok)).toEqual([true, true]);
  });

  it('with --no-wait answers once the call ran, or says it is still queued', async () => {
    const ran = await runCli(['call', '--no-wait', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], sb.env);
    expect(lines(ran.stdout)[0]).toMatchObject({ ok: true, result: { rows: [[1]] } });
    const queued = await runCli(['call', '--no-wait', '--timeout', '0.3', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], {
      ...sb.env,
      AGENTDB_PREFIX: `${sb.env.AGENTDB_PREFIX}-idle`,
    });
    expect(queued.code).toBe(0);
    expect(lines(queued.stdout)[0]).toMatchObject({ ok: false, status: 'queued' });
  });

  it('says so when no worker picks a call up in time', async () => {
    const nobody = await runCli(['call', '--timeout', '0.5', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], {
      ...sb.env,
      AGENTDB_PREFIX: `${sb.env.AGENTDB_PREFIX}-none`,
    });
    expect(nobody.code).toBe(3);
    expect(lines(nobody.stdout)[0]).toMatchObject({ ok: false, error: { code: 'NO_WORKER' } });
    // The prefix it looked under, since a mismatch with the server's is the usual cause.
    expect(lines(nobody.stdout)[0].error.message).toContain(`AGENTDB_PREFIX "${sb.env.AGENTDB_PREFIX}-none"`);
  });

  it('--call-id: the same id with another scope exits 1 with IDEMPOTENCY_CONFLICT and runs nothing, and the id keeps answering the first call', async () => {
    // A workspace whose shared database sits on another shard than its agent's (issue 25).
    const ws = ['cw0', 'cw1', 'cw2', 'cw3', 'cw4', 'cw5', 'cw6', 'cw7'].find((w) => shardOf(databaseId(w), 4) !== shardOf(databaseId(w, 'idem'), 4))!;
    const as = ['--workspace', ws, '--agent', 'idem', '--settings', '{"database":"workspace","sharedData":true}'];
    expect((await runCli(['call', ...as, 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE s (v)","scope":"workspace"}'], sb.env)).code).toBe(0);
    const first = await runCli(['call', ...as, '--call-id', 'c2', 'DATA_WRITE_SQL', '{"sql":"INSERT INTO s VALUES (1)","scope":"workspace"}'], sb.env);
    expect(first.code).toBe(0);
    expect(lines(first.stdout)[0]).toMatchObject({ ok: true, callId: 'c2', result: { changes: 1 } });
    const probe = await runCli(['call', ...as, '--call-id', 'c2', 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE idem_probe (x)"}'], sb.env);
    expect(probe.code).toBe(1);
    expect(lines(probe.stdout)[0]).toMatchObject({ ok: false, callId: 'c2', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    const result = await runCli(['result', 'c2', '--workspace', ws, '--agent', 'idem'], sb.env);
    expect(lines(result.stdout)[0]).toEqual(lines(first.stdout)[0]);
    const caller = { workspace: ws, agent: 'idem', settings: { database: 'workspace', sharedData: true } };
    const reads = [
      { ...caller, tool: 'DATA_DESCRIBE_SCHEMA', arguments: {} },
      { ...caller, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM s', scope: 'workspace' } },
    ];
    const [own, count] = lines((await runCli(['call', '--batch', '-'], sb.env, reads.map((r) => JSON.stringify(r)).join('\n'))).stdout);
    expect(own.result.tables.map((t: { name: string }) => t.name)).not.toContain('idem_probe');
    expect(count).toMatchObject({ ok: true, result: { rows: [[1]] } });
  });
});

describe('agentdb tools and usage', () => {
  it('prints the agent-visible contract as JSON', async () => {
    const out = await runCli(['tools', '--json'], sb.env);
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout).map((t: { name: string }) => t.name)).toEqual([
      'DATA_DESCRIBE_SCHEMA',
      'DATA_QUERY_SQL',
      'DATA_WRITE_SQL',
      'DATA_DROP_TABLE',
    ]);
  });

  it('prints metered credits for a workspace', async () => {
    const out = await runCli(['usage', '--workspace', 'acme', '--json'], sb.env);
    const rows = (JSON.parse(out.stdout) as { credits: { agent: string; tool: string; credits: number }[] }).credits;
    expect(rows.find((r) => r.agent === 'scout' && r.tool === 'DATA_WRITE_SQL')?.credits).toBe(2);
    // As text, also what the workspace holds in Redis against its plan's budget.
    const text = await runCli(['usage', '--workspace', 'acme'], sb.env);
    expect(text.stdout).toMatch(/\nredis: [1-9]\d* of 134217728 bytes \(plan pro; REDIS_BYTES_PER_WORKSPACE not set for this command\)\n$/);
  });

  it('answers a flag or argument it does not know with one line and exit 2, before doing anything', async () => {
    const runs = await Promise.all(
      [
        ['tools', '--yaml'],
        ['tools', 'extra'],
        ['usage', '--workspace', 'acme', '--bogus'],
        ['usage'],
        ['worker', '--bogus'],
        ['start', '--bogus'],
        [],
        ['frobnicate'],
      ].map(async (args) => ({ args, ...(await runCli(args, sb.env)) })),
    );
    for (const { args, code, stdout, stderr } of runs) {
      expect(code, `agentdb ${args.join(' ')}: ${stderr}`).toBe(2);
      expect(stdout, args.join(' ')).toBe('');
      expect(stderr, args.join(' ')).not.toMatch(/\n\s+at /);
    }
    expect(runs.find((r) => r.args[0] === 'usage' && r.args.length === 1)!.stderr).toMatch(
      /^agentdb usage: required option '--workspace <name>' not specified\n/,
    );
    expect(runs.find((r) => r.args[0] === 'start')!.stderr).toMatch(/^agentdb start: unknown option '--bogus'\nRun 'agentdb start --help' for its usage\.\n$/);
  });

  it('stops start-up with a message naming a bad variable', async () => {
    const out = await runCli(['usage', '--workspace', 'acme'], { ...sb.env, SHARD_COUNT: 'lots' });
    expect(out.code).toBe(2);
    expect(out.stderr).toContain('SHARD_COUNT');
  });
});

describe('agentdb result and a parked call', () => {
  it('prints awaiting_approval for --no-wait, the same from result, and the outcome once approved', async () => {
    const gated = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent","approval":"write"}'];
    const parked = await runCli(['call', '--no-wait', ...gated, 'DATA_WRITE_SQL', '{"sql":"INSERT INTO t VALUES (5)"}'], sb.env);
    expect(parked.code).toBe(0);
    const answer = lines(parked.stdout)[0];
    expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval', approval: { id: expect.stringMatching(/^ap_/), tier: 'write' } });

    const caller = ['--workspace', 'acme', '--agent', 'scout'];
    const now = await runCli(['result', answer.callId, ...caller], sb.env);
    expect(lines(now.stdout)[0]).toMatchObject({ status: 'awaiting_approval' });
    // The same call id of another agent is another call, which does not exist.
    const elsewhere = await runCli(['result', answer.callId, '--workspace', 'acme', '--agent', 'other'], sb.env);
    expect(lines(elsewhere.stdout)[0]).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
    const waiting = runCli(['result', answer.callId, ...caller, '--wait'], sb.env);

    const ops = await runCli(['members', 'add', '--workspace', 'acme', '--name', 'ops', '--role', 'member', '--json'], sb.env);
    expect(ops.code).toBe(0);
    expect((await runCli(['approvals', 'approve', answer.approval.id, '--key', lines(ops.stdout)[0].key], sb.env)).code).toBe(0);
    const done = await waiting;
    expect(done.code).toBe(0);
    expect(lines(done.stdout)[0]).toMatchObject({ ok: true, callId: answer.callId, result: { changes: 1 } });

    const unknown = await runCli(['result', 'no-such-call', ...caller], sb.env);
    expect(unknown.code).toBe(1);
    expect(lines(unknown.stdout)[0]).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
  });
});
