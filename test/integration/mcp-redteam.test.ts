import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 32, R6: the red team's statements through the MCP adapter, one of each family: the
// adapter parses, calls the core and formats, so each must answer as the store does, with the
// code first and the hint after the fenced refusal; a statement hidden in a comment runs nothing.

let sb: Sandbox;
let k: KeyedApp;
let c: Client;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb, { approvalWaitMs: 60_000 });
  const key = await k.agentKey('acme', 'red', { displayName: 'Red', settings: { database: 'agent' } });
  const base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  c = new Client({ name: 'agentdb-redteam', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
}, 60_000);
afterAll(async () => {
  await c?.close();
  await k?.close();
  await sb?.cleanup();
});

type Result = { content: { type: string; text: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean };
const call = async (name: string, args: Record<string, unknown> = {}) => (await c.callTool({ name, arguments: args })) as Result;

it('answers each family of hostile statement with its code, and a cascading drop with what to do first', async () => {
  for (const sql of [
    'CREATE TABLE p (id INTEGER PRIMARY KEY)',
    'CREATE TABLE c (pid REFERENCES p(id) ON DELETE CASCADE)',
    'INSERT INTO p VALUES (1), (2)',
    'INSERT INTO c VALUES (1)',
  ])
    expect((await call('DATA_WRITE_SQL', { sql })).isError, sql).toBeFalsy();
  const refused: [string, Record<string, unknown>, string][] = [
    ['DATA_QUERY_SQL', { sql: 'SELECT * FROM _agentdb_calls' }, 'SQL_REFUSED'],
    ['DATA_QUERY_SQL', { sql: 'SELECT sql FROM sqlite_master' }, 'SQL_REFUSED'],
    ['DATA_QUERY_SQL', { sql: 'SELECT 1; DELETE FROM p' }, 'SQL_MULTIPLE_STATEMENTS'],
    ['DATA_QUERY_SQL', { sql: '/* a /* b */ ; DELETE FROM p */ SELECT 1' }, ''],
    ['DATA_QUERY_SQL', { sql: 'DELETE FROM p' }, 'SQL_REFUSED'],
    ['DATA_WRITE_SQL', { sql: 'DROP TABLE p' }, 'SQL_REFUSED'],
    ['DATA_WRITE_SQL', { sql: "ATTACH 'x.db' AS x" }, 'SQL_REFUSED'],
    ['DATA_WRITE_SQL', { sql: 'CREATE TRIGGER tr AFTER INSERT ON p BEGIN DELETE FROM c; END' }, 'SQL_REFUSED'],
    ['DATA_WRITE_SQL', { sql: 'PRAGMA foreign_keys = OFF' }, 'SQL_REFUSED'],
    ['DATA_DROP_TABLE', { table: '_agentdb_calls' }, 'SQL_REFUSED'],
    ['DATA_DROP_TABLE', { table: 'p' }, 'DROP_REFERENCED'],
  ];
  for (const [tool, args, code] of refused) {
    const r = await call(tool, args);
    if (code === '') continue;
    const text = r.content.map((x) => x.text).join('\n');
    expect(r.isError, `${tool} ${JSON.stringify(args)}`).toBe(true);
    expect(text.split('\n')[0], `${tool} ${JSON.stringify(args)}`).toBe(code);
  }
  const drop = (await call('DATA_DROP_TABLE', { table: 'p' })).content.map((x) => x.text).join('\n');
  expect(drop).toMatch(/Hint: Delete those rows, or set their reference to NULL, with DATA_WRITE_SQL \(or drop the referring tables\) first/);
  const rows = await call('DATA_QUERY_SQL', { sql: 'SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM c)' });
  expect(rows.structuredContent).toMatchObject({ rows: [[2, 1]] });
});
