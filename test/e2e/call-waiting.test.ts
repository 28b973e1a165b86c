import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, spawnCli, startCli, stop } from '../helpers/processes.ts';

// A waited `agentdb call` used to print nothing until it finished: not even the approval id
// of a call parked for a person, nor that no worker had taken it.
let sb: Sandbox;
let worker: ChildProcess;

beforeAll(async () => {
  sb = sandbox();
  worker = await startCli(['worker'], sb.env);
  expect((await runCli(['members', 'add', '--workspace', 'acme', '--name', 'ops'], sb.env)).code).toBe(0);
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

const gated = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent","approval":"write"}'];
const PARKED = /call (\S+) waits for a person to approve it \(approval (\S+), expires [^)]+\)/;

describe('a waited agentdb call parked for a person', () => {
  it('says at once on stderr that it waits for a person, with the approval id and the commands that decide it', async () => {
    const live = spawnCli(['call', ...gated, 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE decided (x)"}'], sb.env);
    await live.stderrMatches(PARKED);
    const [, callId, approvalId] = PARKED.exec(live.stderr())!;
    expect(live.stderr()).toContain(`agentdb approvals approve ${approvalId} --key-file MEMBER_KEY_FILE`);
    expect(live.stderr()).toContain(`agentdb approvals reject ${approvalId} --key-file MEMBER_KEY_FILE`);
    expect(live.stdout()).toBe('');

    expect((await runCli(['approvals', 'approve', approvalId!, '--operator', '--by', 'ops'], sb.env)).code).toBe(0);
    const done = await live.exited;
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ ok: true, callId });
  });

  it('on Ctrl-C says the call stays parked and how to get its outcome later, and leaves it parked', async () => {
    const live = spawnCli(['call', ...gated, 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE later (x)"}'], sb.env);
    await live.stderrMatches(PARKED);
    const [, callId, approvalId] = PARKED.exec(live.stderr())!;
    live.child.kill('SIGINT');
    const out = await live.exited;
    expect(out.code).toBe(130);
    expect(out.stdout).toBe('');
    expect(out.stderr).toContain(`stopped waiting. Call ${callId} stays parked for approval ${approvalId}`);
    expect(out.stderr).toContain(`agentdb result ${callId} --workspace acme --agent scout --wait`);
    const pending = JSON.parse((await runCli(['approvals', 'list', '--workspace', 'acme', '--json'], sb.env)).stdout) as { id: string }[];
    expect(pending.map((a) => a.id)).toContain(approvalId);
  });
});

describe('a waited agentdb call no worker takes', () => {
  const idle = () => ({ ...sb.env, AGENTDB_PREFIX: `${sb.env.AGENTDB_PREFIX}-idle` });
  const query = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}', 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'];

  it('says so on stderr after a few seconds and keeps waiting up to --timeout', async () => {
    // The note comes after 3 s: a timeout a second past it shows both, with 2 s less waiting than 6.
    const out = await runCli(['call', '--timeout', '4', ...query], idle());
    expect(out.stderr).toMatch(/^agentdb call: no worker has taken call \S+ after 3 s; still waiting, up to --timeout 4 s\./);
    // NO_WORKER may pass once a worker runs: exit 3, try again later.
    expect(out.code).toBe(3);
    expect(JSON.parse(out.stdout)).toMatchObject({ ok: false, error: { code: 'NO_WORKER' } });
  });

  it('on Ctrl-C says the call is not withdrawn and how to get its outcome later', async () => {
    const live = spawnCli(['call', '--timeout', '60', ...query], idle());
    await live.stderrMatches(/no worker has taken call (\S+)/);
    const callId = /no worker has taken call (\S+)/.exec(live.stderr())![1];
    live.child.kill('SIGINT');
    const out = await live.exited;
    expect(out.code).toBe(130);
    expect(out.stderr).toContain(
      `Call ${callId} is not withdrawn: it runs when a worker takes it; its outcome: agentdb result ${callId} --workspace acme --agent scout --wait`,
    );
  });
});
