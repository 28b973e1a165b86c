import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { type RunResult, runCli, startCli, stop } from '../helpers/processes.ts';

// Every command's exit status by what it answered, as `agentdb --help` and docs/errors.md ("Exit
// status") list it: 2 a bad command line (the core's INVALID_ARGUMENTS and UNKNOWN_TOOL too), 1 a
// refusal or a failure that fails again as it is (NOT_FOUND among them), 3 not now (Redis or a
// worker did not answer, a retryable code). Review N9 (session 33): every failure exited 1, so a
// script could not tell "try again later" from "give up", and a flag's value the core refused
// (`--into scout9`) exited 1 where one the command refused itself exited 2.
let sb: Sandbox;
let worker: ChildProcess;

const who = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}'];
const cli = (...args: string[]) => runCli(args, sb.env);
/** The code a run printed: `{ error }` or an envelope on stdout, or `agentdb …: CODE: …` on stderr. */
function codeOf(run: RunResult): string | undefined {
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  try {
    return (JSON.parse(line) as { error?: { code?: string } }).error?.code;
  } catch {
    return /^agentdb [a-z -]+: ([A-Z_]+): /.exec(run.stderr)?.[1];
  }
}
const said = (run: RunResult) => ({ code: run.code, error: codeOf(run) });

beforeAll(async () => {
  sb = sandbox();
  worker = await startCli(['worker'], sb.env);
  expect((await cli('call', ...who, 'DATA_WRITE_SQL', '{"sql":"CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)"}')).code).toBe(0);
  expect((await cli('members', 'add', '--workspace', 'acme', '--name', 'ada', '--role', 'admin')).code).toBe(0);
}, 60_000);
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

describe('agentdb exit status', () => {
  it('is 2 for a bad command line, whether the command or the core finds it, and 1 for what is not there or refused', async () => {
    const [flag, moment, into, tool, args, config, taken, mismatch, ...refused] = await Promise.all([
      cli('history', 'acme/scout', '--nope'),
      cli('restore', 'acme/scout', '--at', 'yesterday'),
      // A new database's name without its workspace: refused by the history op, INVALID_ARGUMENTS.
      cli('restore', 'acme/scout', '--at', new Date().toISOString(), '--into', 'scout9', '--dry-run'),
      cli('call', ...who, 'DATA_NUKE', '{}'),
      cli('call', ...who, 'DATA_QUERY_SQL', '{"sqlx":"SELECT 1"}'),
      runCli(['history', 'acme/scout'], { ...sb.env, REDIS_URL: 'http://nowhere' }),
      // A member's name already taken: ALREADY_EXISTS, a refusal (1), not a bad command line
      // (review N10: it was INVALID_ARGUMENTS, exit 2, as if the flags were wrong).
      cli('members', 'add', '--workspace', 'acme', '--name', 'ada'),
      // Settings not the service's: the workers publish SHARD_COUNT 4.
      runCli(['call', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], { ...sb.env, SHARD_COUNT: '8' }),
      cli('history', 'acme/nobody'),
      cli('activity', 'acme/nobody'),
      cli('restore', 'acme/scout', '--undo', 'u-nothing'),
      cli('result', 'no-such-call', '--workspace', 'acme', '--agent', 'scout'),
      cli('approvals', 'show', 'ap_nothing'),
      runCli(['approvals', 'approve', 'ap_nothing'], { ...sb.env, AGENTDB_MEMBER_KEY: 'adb_not-a-key' }),
      cli('members', 'revoke', '--workspace', 'acme', '--name', 'nobody'),
      cli('agents', 'remove', '--workspace', 'acme', '--agent', 'nobody'),
      cli('call', ...who, 'DATA_QUERY_SQL', `{"sql":"ATTACH 'x' AS y"}`),
      cli('call', '--workspace', 'acme', '--agent', 'scout', 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'),
    ]);
    expect([flag.code, moment.code, config.code]).toEqual([2, 2, 2]);
    expect([into, tool, args, mismatch].map(said)).toEqual([
      { code: 2, error: 'INVALID_ARGUMENTS' },
      { code: 2, error: 'UNKNOWN_TOOL' },
      { code: 2, error: 'INVALID_ARGUMENTS' },
      { code: 2, error: 'CONFIG_MISMATCH' },
    ]);
    expect(said(taken)).toEqual({ code: 1, error: 'ALREADY_EXISTS' });
    // The registry's sentence says nothing was sent; the detail names the counts, not that again.
    expect(JSON.parse(mismatch.stdout).error.message.match(/nothing was sent/g)).toHaveLength(1);
    expect(refused.map(said)).toEqual([
      { code: 1, error: 'NOT_FOUND' },
      { code: 1, error: 'NOT_FOUND' },
      { code: 1, error: 'UNDO_NOT_FOUND' },
      { code: 1, error: 'NOT_FOUND' },
      { code: 1, error: 'NOT_FOUND' },
      { code: 1, error: 'UNAUTHENTICATED' },
      { code: 1, error: 'NOT_FOUND' },
      { code: 1, error: 'NOT_FOUND' },
      { code: 1, error: 'SQL_REFUSED' },
      { code: 1, error: 'DATABASE_OFF' },
    ]);
    // A member's name is said as written, not capitalised as the sentence's first word ("Nobody is not…").
    expect(JSON.parse(taken.stdout).error.message).toContain('Member ada is already active in acme');
    expect(JSON.parse(refused[6]!.stdout).error.message).toContain('Member nobody is not active in acme');
    // NOT_FOUND's own sentence names no kind of thing: an agent not registered read "No such
    // table, view, call, approval, member or database exists." (review N10).
    expect(JSON.parse(refused[7]!.stdout).error.message).toMatch(/^Nothing by that name or id exists\. .*nobody/);
  });

  it('is 3 in every command when Redis does not answer: try again later', { timeout: 60_000 }, async () => {
    const down = { ...sb.env, REDIS_URL: 'redis://127.0.0.1:1' };
    const commands = [
      ['history', 'acme/scout'],
      ['restore', 'acme/scout', '--at', new Date().toISOString()],
      ['call', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'],
      ['result', 'some-call', '--workspace', 'acme', '--agent', 'scout'],
      ['approvals', 'list'],
      ['members', 'list', '--workspace', 'acme'],
      ['agents', 'set', '--workspace', 'acme', '--agent', 'scout', '--database', 'agent'],
      ['usage', '--workspace', 'acme'],
      ['backup', 'now'],
      ['backups'],
      ['executors'],
      ['scheduler', '--prune-now'],
      ['worker'],
    ];
    // `start` starts a redis-server only for a local URL: for another host it stops at once.
    const [start, ...runs] = await Promise.all([
      runCli(['start'], { ...down, REDIS_URL: 'redis://127.0.0.2:1', PORT: '0' }),
      ...commands.map((args) => runCli(args, down)),
    ]);
    expect(start.code, start.stderr).toBe(3);
    expect(start.stderr).toMatch(/^agentdb start: No Redis answers at redis:\/\/127\.0\.0\.2:1/);
    expect(runs.map((r, i) => `${commands[i]!.slice(0, 2).join(' ')}: ${r.code}`)).toEqual(commands.map((c) => `${c.slice(0, 2).join(' ')}: 3`));
    // The call's and the lookup's envelopes carry the code; the others say it on stderr.
    expect([codeOf(runs[2]!), codeOf(runs[3]!)]).toEqual(['UNAVAILABLE', 'UNAVAILABLE']);
    expect(runs[0]!.stderr).toMatch(/^agentdb history: Redis at .* does not answer/);
  });

  it('is 3 for a call no worker took, alone or in a batch whose every failure may pass later, and 1 for a batch with a refusal', async () => {
    const none = { ...sb.env, AGENTDB_PREFIX: `${sb.env.AGENTDB_PREFIX}-none` };
    const line = (sql: string) =>
      JSON.stringify({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql } });
    const [alone, batch, mixed] = await Promise.all([
      runCli(['call', '--timeout', '0.5', ...who, 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], none),
      runCli(['call', '--timeout', '0.5', '--batch', '-'], none, `${line('SELECT 1')}\n${line('SELECT 2')}\n`),
      runCli(['call', '--batch', '-'], sb.env, `${line('SELECT 1')}\n${line("ATTACH 'x' AS y")}\n`),
    ]);
    expect(said(alone)).toEqual({ code: 3, error: 'NO_WORKER' });
    expect(batch.code).toBe(3);
    expect(mixed.code).toBe(1);
  });

  it('is said by --help, the same for every command', async () => {
    const help = await cli('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Exit status, the same for every command[\s\S]*\n {2}2 {4}bad command line[\s\S]*\n {2}3 {4}not now/);
  });
});
