import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// The two-agent hand-off of docs/calls.md (linked from the README), run word for word: a new
// user copies these commands.
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

/** The `npx agentdb …` commands of the sh blocks of a `## ` section of a docs/ page, as argument lists. */
function commandsOf(page: string, section: string): string[][] {
  const lines = readFileSync(new URL(`../../docs/${page}`, import.meta.url), 'utf8').split('\n');
  const start = lines.indexOf(`## ${section}`);
  expect(start, `docs/${page} section ${section}`).toBeGreaterThan(-1);
  // Up to the next heading of its level or above; a `# …` line inside a code block is a comment.
  let end = start + 1;
  for (let fenced = false; end < lines.length; end++) {
    if (lines[end]!.startsWith('```')) fenced = !fenced;
    else if (!fenced && /^#{1,2} /.test(lines[end]!)) break;
  }
  const text = lines.slice(start, end).join('\n') + '\n';
  const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/\\\n\s*/g, ' '));
  return blocks
    .flatMap((b) => b.split('\n'))
    .filter((line) => line.startsWith('npx agentdb '))
    .map((line) => words(line).slice(2));
}

/** Splits a shell line the way sh does for what the docs use: spaces, and single quotes. */
function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

describe("docs/calls.md's two agents, one shared table", () => {
  it('runs as written: research fills the shared leads, outreach reads them', async () => {
    const commands = commandsOf('calls.md', 'Two agents, one shared table');
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
