import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// The README's two-agent hand-off, run word for word: a new user copies these commands.
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

/** The `npx agentdb …` commands of a README section's sh blocks, as argument lists. */
function commandsOf(section: string): string[][] {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf(`### ${section}`);
  expect(start, `README section ${section}`).toBeGreaterThan(-1);
  const text = readme.slice(start, readme.indexOf('\n### ', start + 4));
  const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/\\\n\s*/g, ' '));
  return blocks
    .flatMap((b) => b.split('\n'))
    .filter((line) => line.startsWith('npx agentdb '))
    .map((line) => words(line).slice(2));
}

/** Splits a shell line the way sh does for what the README uses: spaces, and single quotes. */
function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

describe("the README's two agents, one shared table", () => {
  it('runs as written: research fills the shared leads, outreach reads them', async () => {
    const commands = commandsOf('Two agents, one shared table');
    expect(commands).toHaveLength(3);
    const outputs: unknown[] = [];
    for (const args of commands) {
      const out = await runCli(args, sb.env);
      expect(out.code, `${args.join(' ')}: ${out.stdout}${out.stderr}`).toBe(0);
      outputs.push(JSON.parse(out.stdout));
    }
    expect(outputs.at(-1)).toMatchObject({ ok: true, result: { columns: ['email', 'company'], rows: [['ada@northwind.io', 'Northwind']] } });
  });
});
