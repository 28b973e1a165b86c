/**
 * Rows an agent stored reach a person's terminal through `agentdb call` and `agentdb result`,
 * one JSON line each (session 33, R7). JSON.stringify escapes only U+0000-U+001F: a stored
 * U+009B (CSI: cursor moves and colours in terminals that take C1 controls from UTF-8) or a bidi
 * override reached the terminal as it was, where `approvals show` escapes them. Now every such
 * character is a `\u` escape, the same JSON to a parser.
 */
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { call } from '../../src/cli/call.ts';
import { result } from '../../src/cli/result.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

const HOSTILE = 'a\u009b2J\u009d0;owned\u009c b\u202egnp.exe c\u2066d\u200be\u007ff\u2028g\u{e0041}';
let box: Sandbox;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  const client = box.client();
  for (const sql of ['CREATE TABLE notes (body TEXT)', `INSERT INTO notes VALUES (${JSON.stringify(HOSTILE).replace(/^"|"$/g, "'")})`]) {
    expect(await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject(
      { ok: true },
    );
  }
}, 60_000);
afterAll(async () => {
  await box?.cleanup();
});

async function printed(run: (ctx: Parameters<typeof call>[0]) => Promise<number>): Promise<string> {
  const stdout = new PassThrough();
  let said = '';
  stdout.on('data', (b: Buffer) => (said += b.toString()));
  expect(await run({ config: box.config, stdout, stderr: new PassThrough() })).toBe(0);
  return said;
}

it('prints stored text with the characters a terminal acts on escaped, the same JSON to a parser', async () => {
  const flags = { workspace: 'acme', agent: 'scout', settings: '{"database":"agent"}', callId: 'read-hostile', wait: true, timeout: 60 };
  const lines = [
    await printed((ctx) => call(ctx, flags, 'DATA_QUERY_SQL', JSON.stringify({ sql: 'SELECT body FROM notes' }))),
    await printed((ctx) => result(ctx, { workspace: 'acme', agent: 'scout' }, 'read-hostile')),
  ];
  for (const line of lines) {
    expect(line).toMatch(/^\{.*\}\n$/s);
    expect(line).not.toMatch(/[\u007f-\u009f\p{Cf}\u2028\u2029]/u);
    expect(JSON.parse(line)).toMatchObject({ ok: true, result: { rows: [[HOSTILE]] } });
  }
});
