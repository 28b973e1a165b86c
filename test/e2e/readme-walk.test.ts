import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandsOf } from '../helpers/doc-commands.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// The README's commands in the order a new user runs them, word for word: a reviewer following
// it from a fresh clone hit a query with no rows, an `ada` added twice, no way to get a call
// waiting for approval, and `keys mint` for an agent nobody had registered. Each step here is
// run in the same sandbox after the ones before it, as on the reviewer's machine.
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

// In the data folder, as a user's shell in a folder of their own: `--save-key bob.key` writes there.
const cli = (args: string[], env: Record<string, string> = {}) => runCli(args, { ...sb.env, ...env }, undefined, sb.dataDir);

describe("the README's commands, in order", () => {
  it('install and run: the admin ada, whose key the web page asks for', async () => {
    // Inline in the README's prose, not in an sh block.
    expect((await cli(['members', 'add', '--workspace', 'acme', '--name', 'ada', '--role', 'admin'])).code).toBe(0);
  });

  it('call a tool: the query finds the row the calls before it wrote', async () => {
    const commands = commandsOf('README.md', '## Call a tool');
    expect(commands).toHaveLength(3);
    let last: unknown;
    for (const args of commands) {
      const out = await cli(args);
      expect(out.code, `${args.join(' ')}: ${out.stdout}${out.stderr}`).toBe(0);
      last = JSON.parse(out.stdout);
    }
    expect(last).toMatchObject({ ok: true, result: { columns: ['id', 'email'], rows: [[1, 'ada@northwind.io']] } });
  });

  it('a person approving: the call waits, a new member lists and approves it, and it runs', async () => {
    const commands = commandsOf('README.md', '### A person approving');
    const [call, list, add, approve, reject, result] = commands;
    expect(commands).toHaveLength(6);
    expect([call![0], list![0], add![0], approve!.slice(0, 2), reject!.slice(0, 2), result![0]]).toEqual([
      'call',
      'approvals',
      'members',
      ['approvals', 'approve'],
      ['approvals', 'reject'],
      'result',
    ]);

    const parked = await cli(call!);
    expect(parked.code, parked.stdout + parked.stderr).toBe(0);
    const envelope = JSON.parse(parked.stdout) as { status: string; callId: string; approval: { id: string } };
    expect(envelope).toMatchObject({ ok: false, status: 'awaiting_approval', approval: { id: expect.stringMatching(/^ap_/) } });

    // Listing needs no key.
    expect((await cli(list!)).stdout).toContain(envelope.approval.id);
    const added = await cli(add!);
    expect(added.code, added.stdout + added.stderr).toBe(0);
    expect(added.stdout).not.toContain('adb_');
    // `export AGENTDB_MEMBER_KEY="$(cat bob.key)"`, then the decisions with the id the list showed.
    const env = { AGENTDB_MEMBER_KEY: readFileSync(path.join(sb.dataDir, 'bob.key'), 'utf8') };
    const decided = await cli(
      approve!.map((w) => (w === 'APPROVAL_ID' ? envelope.approval.id : w)),
      env,
    );
    expect(decided.code, decided.stdout + decided.stderr).toBe(0);
    // Reject is the other choice; this call is decided already. The caller that did not wait asks for its outcome.
    const outcome = await cli(result!.map((w) => (w === 'CALL_ID' ? envelope.callId : w)));
    expect(JSON.parse(outcome.stdout)).toMatchObject({ ok: true, result: { changes: 1 } });
  });

  it('an MCP client: the agent is registered, so its key is minted; agents set says where its database came from', async () => {
    const commands = commandsOf('README.md', '### An MCP client');
    expect(commands.map((c) => c.slice(0, 2))).toEqual([
      ['workspaces', 'set'],
      ['agents', 'set'],
      ['keys', 'mint'],
    ]);
    const outs = [];
    for (const args of commands) {
      const out = await cli(args);
      expect(out.code, `${args.join(' ')}: ${out.stdout}${out.stderr}`).toBe(0);
      outs.push(out);
    }
    expect(outs[1]!.stderr).toContain('note: acme/scout already has a database, made by calls as acme/scout without a key');
    expect(outs[2]!.stdout).toContain('key saved to scout.key (mode 600)');
    expect(readFileSync(path.join(sb.dataDir, 'scout.key'), 'utf8')).toMatch(/^adb_\S+\n$/);
  });
});
