import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandsOf } from '../helpers/doc-commands.ts';
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

describe("docs/calls.md's two agents, one shared table", () => {
  it('runs as written: research fills the shared leads, outreach reads them', async () => {
    const commands = commandsOf('docs/calls.md', '## Two agents, one shared table');
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
