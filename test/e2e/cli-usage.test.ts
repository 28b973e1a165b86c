import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { REDIS_URL, sandbox } from '../helpers/harness.ts';
import { CLI, runCli } from '../helpers/processes.ts';

// The command line itself: help, version and plain-word answers to what a person gets wrong.
// No worker runs: none of these may enqueue anything.
const sb = sandbox();
afterAll(() => sb.cleanup());
const cli = (...args: string[]) => runCli(args, sb.env);
const version = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

async function keysUnderPrefix(): Promise<string[]> {
  const redis = new Redis(REDIS_URL);
  try {
    return await redis.keys(`${sb.config.prefix}*`);
  } finally {
    redis.disconnect();
  }
}

describe('agentdb --help, COMMAND --help, --version', () => {
  it('prints help and the version on stdout and exits 0', async () => {
    const help = await cli('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: agentdb /);
    for (const command of ['start', 'worker', 'scheduler', 'call', 'result', 'tools', 'usage', 'members', 'approvals']) {
      expect(help.stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
    const call = await cli('call', '--help');
    expect(call.code).toBe(0);
    expect(call.stdout).toMatch(/^Usage: agentdb call \[options\] \[tool\] \[args_json\]/);
    expect(call.stdout).toContain('--workspace <name>');
    expect(call.stdout).toContain('--batch <file>');
    const add = await cli('members', 'add', '--help');
    expect(add.code).toBe(0);
    expect(add.stdout).toContain('--role <role>');
    const v = await cli('--version');
    expect(v).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it('says which command is unknown, and answers a bare agentdb with the help, exit 2', async () => {
    const unknown = await cli('frobnicate');
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toMatch(/^agentdb: unknown command 'frobnicate'\n/);
    const bare = await cli();
    expect(bare).toMatchObject({ code: 2, stdout: '' });
    expect(bare.stderr).toMatch(/^Usage: agentdb /);
  });

  it('stops quietly when the reader of its output has gone (agentdb … | head)', async () => {
    const child = spawn(process.execPath, [...CLI, 'tools', '--json'], { env: { ...process.env, ...sb.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    // The reader goes away before a byte is read: every write meets a closed pipe.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = (await once(child, 'close')) as [number | null];
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe('agentdb call with a command line it cannot run', () => {
  const who = ['--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}'];

  it('exits 2 for a missing --workspace or --agent, bad JSON or an unknown flag, prints no envelope and enqueues nothing', async () => {
    const cases: [string[], RegExp][] = [
      [['call', '--agent', 'scout', 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], /^agentdb call: --workspace is required/],
      [['call', '--workspace', 'acme', 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'], /^agentdb call: --agent is required/],
      [['call', ...who, 'DATA_QUERY_SQL', '{"sql":'], /^agentdb call: ARGS_JSON is not valid JSON \(.+\); quote it for the shell/],
      [
        ['call', '--workspace', 'acme', '--agent', 'scout', '--settings', '{database:agent}', 'DATA_QUERY_SQL', '{}'],
        /^agentdb call: --settings is not valid JSON/,
      ],
      // Settings the schema refuses: a bad command line too, in the words the call's refusal used.
      [
        ['call', '--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"nope"}', 'DATA_QUERY_SQL', '{}'],
        /^agentdb call: --settings is not valid: settings\.database: Invalid option: expected one of "off"\|"agent"\|"workspace"\n/,
      ],
      [
        ['call', '--workspace', 'acme', '--agent', 'scout', '--settings', '{"databse":"agent"}', 'DATA_QUERY_SQL', '{}'],
        /^agentdb call: --settings is not valid: settings: Unrecognized key: "databse"\n/,
      ],
      [['call', ...who], /^agentdb call: give TOOL and ARGS_JSON, or --batch FILE\|-/],
      [['call', ...who, '--colour', 'DATA_QUERY_SQL', '{}'], /^agentdb call: unknown option '--colour'/],
      [
        ['call', ...who, '--timeout', 'soon', 'DATA_QUERY_SQL', '{}'],
        /^agentdb call: option '--timeout <seconds>' argument 'soon' is invalid\. It takes a number of seconds above 0\./,
      ],
      [['call', '--batch', '-', '--workspace', 'acme'], /^agentdb call: --workspace goes inside each line of a --batch/],
    ];
    // Refused before anything is read or written: run at once, not one after another.
    const outs = await Promise.all(cases.map(([args]) => runCli(args, sb.env)));
    for (const [i, [args, message]] of cases.entries()) {
      const out = outs[i]!;
      expect(out.code, args.join(' ')).toBe(2);
      expect(out.stdout, args.join(' ')).toBe('');
      expect(out.stderr, args.join(' ')).toMatch(message);
      expect(out.stderr, args.join(' ')).toMatch(/Run 'agentdb call --help' for its usage\.\n$/);
    }
    expect(await keysUnderPrefix()).toEqual([]);
  });

  it('answers an agent without settings once that it has no database, with the flag that gives it one', async () => {
    const out = await cli('call', '--workspace', 'acme', '--agent', 'scout', 'DATA_DESCRIBE_SCHEMA');
    expect(out.code).toBe(1);
    const env = JSON.parse(out.stdout) as { error: { code: string; message: string; hint: string } };
    expect(env.error.code).toBe('DATABASE_OFF');
    expect(env.error.message.match(/no database/g)).toHaveLength(1);
    expect(env.error.hint).toContain(`--settings '{"database":"agent"}'`);
  });
});
