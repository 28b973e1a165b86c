import { afterAll, describe, expect, it } from 'vitest';
import { sandbox } from '../helpers/harness.ts';
import { freePort } from '../helpers/own-redis.ts';
import { runCli } from '../helpers/processes.ts';

// REDIS_URL points at a port nothing listens on. Before, `result` and `scheduler --prune-now`
// hung for good, `approvals list` and `members list` printed a stack trace after 18 s, and
// `call` answered only after 20 s.
const sb = sandbox();
afterAll(() => sb.cleanup());

describe('every command with REDIS_URL pointing at nothing', () => {
  it('says that Redis at the URL does not answer and exits non-zero, without a stack trace', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const env = { ...sb.env, REDIS_URL: url };
    const commands = [
      ['approvals', 'list'],
      ['approvals', 'approve', 'ap_x', '--key', `adb_${'x'.repeat(43)}`],
      ['members', 'list', '--workspace', 'acme'],
      ['members', 'add', '--workspace', 'acme', '--name', 'ada'],
      ['usage', '--workspace', 'acme'],
      ['result', 'some-call', '--workspace', 'acme', '--agent', 'scout'],
      ['result', 'some-call', '--workspace', 'acme', '--agent', '@ada'],
      ['scheduler', '--prune-now'],
      ['worker'],
      ['call', '--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}', 'DATA_QUERY_SQL', '{"sql":"SELECT 1"}'],
    ];
    const runs = await Promise.all(commands.map(async (args) => ({ args, ...(await runCli(args, env)) })));
    for (const { args, code, stdout, stderr } of runs) {
      const what = `agentdb ${args.join(' ')}: ${stdout}${stderr}`;
      expect(code, what).not.toBe(0);
      expect(`${stdout}${stderr}`, what).toContain(`Redis at ${url} does not answer (connect ECONNREFUSED`);
      expect(stderr, what).not.toMatch(/\n\s+at /);
    }
    // A call still answers with its envelope: UNAVAILABLE, which a caller may retry.
    const call = runs.find((r) => r.args[0] === 'call')!;
    expect(JSON.parse(call.stdout)).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    // A member's `@name` too: the lookup of the active member is the client's, on its connection.
    for (const result of runs.filter((r) => r.args[0] === 'result'))
      expect(JSON.parse(result.stdout)).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
  });
});
