import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.ts';

// Session 38, N16: a clone installed on Node 24 and started from a terminal whose `node` was the
// system's Node 20: `agentdb start` listened, then its executor children crashed one after another
// (SIGSEGV, better-sqlite3 13 needs Node 22) and it exited with nothing saying why. Every command
// now says which Node it needs before it does anything; help and --version still answer.

/** Runs the CLI in this process as if on Node `version`: its exit status and what it wrote. */
async function run(argv: string[], version: string) {
  let out = '';
  let err = '';
  const io = { stdout: { write: (s: string) => ((out += s), true) }, stderr: { write: (s: string) => ((err += s), true) } };
  const code = await main(argv, io as never, version);
  return { code, out, err };
}

describe('the CLI on a Node agentdb does not run on', () => {
  it('refuses a command on Node 20, naming the Node it needs, before it does anything', async () => {
    const r = await run(['tools', '--json'], '20.20.2');
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/^agentdb tools: Node 20\.20\.2: agentdb needs Node 22 or later .*npm ci again/);
  });

  it('still prints its version and help there', async () => {
    expect((await run(['--version'], '20.20.2')).code).toBe(0);
    expect((await run(['--help'], '20.20.2')).code).toBe(0);
  });
});
