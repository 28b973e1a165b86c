import { runDoctor, type CheckResult } from '../doctor/doctor.ts';
import { EXIT, type CommandContext } from './context.ts';

const LABEL = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' } as const;

/**
 * `agentdb doctor [--json] [--dev]`: checks what agentdb needs of the machine and of its Redis,
 * each with what to change. Exit 1 when a check fails (warnings alone exit 0), so a deployment
 * script can stop on it; `--dev` judges a development machine (a Redis without persistence warns).
 */
export async function doctor(ctx: CommandContext, flags: { json?: boolean; dev?: boolean }): Promise<number> {
  const checks = await runDoctor(ctx.config, { dev: flags.dev === true });
  const failed = checks.some((c) => c.status === 'fail');
  if (flags.json) ctx.stdout.write(`${JSON.stringify({ ok: !failed, checks })}\n`);
  else ctx.stdout.write(table(checks));
  return failed ? EXIT.failed : EXIT.ok;
}

/** One line per check, its fix under it; then the count of each status. */
function table(checks: CheckResult[]): string {
  const width = Math.max(...checks.map((c) => c.check.length));
  const lines = checks.flatMap((c) => [
    `${LABEL[c.status]}  ${c.check.padEnd(width)}  ${c.detail}`,
    ...(c.fix ? [`${' '.repeat(width + 8)}fix: ${c.fix}`] : []),
  ]);
  const count = (s: CheckResult['status']) => checks.filter((c) => c.status === s).length;
  const [warns, fails] = [count('warn'), count('fail')];
  lines.push('', `${count('ok')} ok, ${warns} warning${warns === 1 ? '' : 's'}, ${fails} failure${fails === 1 ? '' : 's'}`);
  return `${lines.join('\n')}\n`;
}
