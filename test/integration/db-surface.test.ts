import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolContracts } from '../../src/contracts/tools.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

let sb: Sandbox;
let k: KeyedApp;
let base: string;
const mcp: Record<string, Client> = {};
const key: Record<string, string> = {};

const surfaces = {
  reader: { kind: 'db', mode: 'read', schemaMode: 'read' },
  writer: { kind: 'db', mode: 'write', schemaMode: 'read' },
  architect: { kind: 'db', mode: 'read', schemaMode: 'write', policy: 'allow' },
  denied: { kind: 'db', mode: 'write', policy: 'deny' },
  flaky: { kind: 'db', mode: 'write', policy: 'retryable-failure' },
  gated: { kind: 'db', mode: 'write', policy: 'require-approval' },
} as const;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // Long enough for a call to be parked before the wait ends on a loaded machine (at 200 ms a CI
  // run at load 20 answered the require-approval call 'running', still on its way to the gate);
  // only the DROP left waiting for a person waits it out.
  k = keyedApp(sb, { approvalWaitMs: 3000 });
  for (const [slug, surface] of Object.entries(surfaces)) {
    key[slug] = await k.agentKey('dbw', slug, { displayName: slug, settings: { database: 'agent' }, surface });
  }
  key.ada = await k.memberKey('dbw', 'ada', 'admin');
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  for (const slug of Object.keys(surfaces)) {
    const c = new Client({ name: 'db', version: '1' });
    await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key[slug]}` } } }));
    mcp[slug] = c;
  }
  // Tables to read and write, made the way the agents' runtime would.
  for (const slug of Object.keys(surfaces)) {
    expect(
      await k.client.call({
        workspace: 'dbw',
        agent: slug,
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)' },
      }),
    ).toMatchObject({ ok: true });
  }
});
afterAll(async () => {
  await Promise.all(Object.values(mcp).map((c) => c.close()));
  await k.close();
  await sb.cleanup();
});

type R = { structuredContent?: Record<string, unknown> & { error?: { code: string; message: string } }; isError?: boolean; content: { text: string }[] };
const call = async (slug: string, name: string, args: Record<string, unknown> = {}) => (await mcp[slug]!.callTool({ name, arguments: args })) as R;
const code = (r: R) => (r.isError ? r.structuredContent!.error!.code : 'ok');
/** What a call answers: its code, or UNKNOWN_TOOL for the protocol error (-32602) of a tool not listed. */
const codeOf = (r: Promise<R>) => r.then(code, (err: { code?: number }) => (err.code === -32602 ? 'UNKNOWN_TOOL' : Promise.reject(err)));

describe('the db_* surface (db-capability.md)', () => {
  it('lists db_query and db_schema in read mode, db_exec too in a write mode, with the documented schemas', async () => {
    // db_query's one addition to db-capability.md: an optional as_of (issue 29), the DATA_* tools' own.
    const asOf = toolContracts().find((t) => t.name === 'DATA_QUERY_SQL')!.inputSchema.properties as Record<string, unknown>;
    const query = { additionalProperties: false, properties: { statement: { type: 'string' }, as_of: asOf.as_of }, type: 'object', required: ['statement'] };
    const schema = { additionalProperties: false, properties: {}, type: 'object' };
    const exec = {
      additionalProperties: false,
      properties: { rationale: { type: 'string' }, statement: { type: 'string' } },
      type: 'object',
      required: ['statement', 'rationale'],
    };
    const read = (await mcp.reader!.listTools()).tools;
    expect(read.map((t) => [t.name, t.inputSchema])).toEqual([
      ['db_query', query],
      ['db_schema', schema],
    ]);
    expect(read.every((t) => t.annotations?.readOnlyHint === true)).toBe(true);
    const write = (await mcp.writer!.listTools()).tools;
    expect(write.map((t) => t.name)).toEqual(['db_exec', 'db_query', 'db_schema']);
    const execTool = write.find((t) => t.name === 'db_exec')!;
    expect(execTool.inputSchema).toEqual(exec);
    // A DELETE or an UPDATE destroys data: db_exec is destructive in every write mode.
    expect(execTool.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect((await mcp.architect!.listTools()).tools.find((t) => t.name === 'db_exec')!.annotations).toMatchObject({ destructiveHint: true });
  });

  it('db_query: one SELECT, WITH … SELECT or introspection PRAGMA; nothing else', async () => {
    expect(await call('reader', 'db_query', { statement: 'SELECT count(*) AS n FROM items' })).toMatchObject({
      isError: false,
      structuredContent: { columns: ['n'], rows: [[0]] },
    });
    expect(await call('reader', 'db_query', { statement: 'WITH x AS (SELECT 1 AS a) SELECT a FROM x' })).toMatchObject({ isError: false });
    expect(await call('reader', 'db_query', { statement: 'PRAGMA table_info(items)' })).toMatchObject({
      isError: false,
      structuredContent: { rows: expect.arrayContaining([expect.arrayContaining(['name'])]) },
    });
    for (const statement of [
      'PRAGMA user_version',
      'PRAGMA journal_mode = DELETE',
      'INSERT INTO items (name) VALUES (1)',
      "ATTACH 'x.db' AS x",
      'SELECT 1; SELECT 2',
      'SELECT * FROM sqlite_master',
    ]) {
      expect(code(await call('reader', 'db_query', { statement })), statement).toMatch(/^SQL_(REFUSED|MULTIPLE_STATEMENTS)$/);
    }
    expect(code(await call('reader', 'db_query', { statement: 'SELECT 1', extra: 1 }))).toBe('INVALID_ARGUMENTS');
  });

  it('db_schema answers { database, schema }', async () => {
    expect(await call('reader', 'db_schema')).toMatchObject({
      isError: false,
      structuredContent: { database: 'dbw/reader', schema: { tables: [expect.objectContaining({ name: 'items' })] } },
    });
  });

  it('db_exec: a rationale, one statement, never read-only SQL; data needs mode write, DDL schemaMode write', async () => {
    expect(await codeOf(call('reader', 'db_exec', { statement: "INSERT INTO items (name) VALUES ('a')", rationale: 'r' }))).toBe('UNKNOWN_TOOL');
    expect(await call('writer', 'db_exec', { statement: "INSERT INTO items (name) VALUES ('a')", rationale: 'seed a row' })).toMatchObject({
      isError: false,
      structuredContent: { changes: 1 },
    });
    expect(code(await call('writer', 'db_exec', { statement: "INSERT INTO items (name) VALUES ('b')", rationale: '  ' }))).toBe('INVALID_ARGUMENTS');
    expect(code(await call('writer', 'db_exec', { statement: "INSERT INTO items (name) VALUES ('b')" }))).toBe('INVALID_ARGUMENTS');
    expect(code(await call('writer', 'db_exec', { statement: 'SELECT * FROM items', rationale: 'r' }))).toBe('SQL_REFUSED');
    expect(code(await call('writer', 'db_exec', { statement: 'DELETE FROM items; DELETE FROM items', rationale: 'r' }))).toBe('SQL_MULTIPLE_STATEMENTS');
    const ddl = await call('writer', 'db_exec', { statement: 'CREATE TABLE more (x)', rationale: 'r' });
    expect(code(ddl)).toBe('NOT_PERMITTED');
    expect(ddl.structuredContent!.error!.message).toContain('DDL requires schemaMode: write');

    expect(await call('architect', 'db_exec', { statement: 'CREATE TABLE more (x)', rationale: 'a table for more' })).toMatchObject({ isError: false });
    expect(code(await call('architect', 'db_exec', { statement: 'INSERT INTO more VALUES (1)', rationale: 'r' }))).toBe('NOT_PERMITTED');
  });

  it('agentdb’s guard floor holds under schemaMode write; a DROP waits for a person', async () => {
    for (const statement of [
      'VACUUM',
      'REINDEX',
      'CREATE TRIGGER t AFTER INSERT ON items BEGIN SELECT 1; END',
      'CREATE VIRTUAL TABLE v USING fts5(x)',
      'CREATE TEMP TABLE tt (x)',
      "ATTACH 'x' AS y",
      'ALTER TABLE items DROP COLUMN name',
      'DROP INDEX i',
      'DROP TABLE sqlite_master',
    ]) {
      expect(code(await call('architect', 'db_exec', { statement, rationale: 'r' })), statement).toMatch(/^SQL_(REFUSED|SYNTAX)$/);
    }
    const drop = await call('architect', 'db_exec', { statement: 'DROP TABLE more', rationale: 'no longer needed' });
    expect(drop).toMatchObject({ isError: false, structuredContent: { status: 'awaiting_approval', approval: { id: expect.any(String) } } });
  });

  it('policy: deny refuses, retryable-failure fails retryably, require-approval answers APPROVAL_REQUIRED at once', async () => {
    const args = { statement: "INSERT INTO items (name) VALUES ('p')", rationale: 'policy check' };
    expect(await call('denied', 'db_exec', args)).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'NOT_PERMITTED', message: expect.stringContaining('policy deny') } },
    });
    expect(await call('flaky', 'db_exec', args)).toMatchObject({ isError: true, structuredContent: { error: { code: 'RETRY_LATER' } } });
    // The checks run also under a policy: a read-only statement is refused before it.
    expect(code(await call('denied', 'db_exec', { statement: 'SELECT 1', rationale: 'r' }))).toBe('SQL_REFUSED');

    const gated = await call('gated', 'db_exec', args);
    expect(gated).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'APPROVAL_REQUIRED' }, approval: { id: expect.any(String), statement: args.statement, rationale: args.rationale } },
    });
    // Through /v1/calls the same; once approved the statement runs under its call id.
    const r = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer ${key.gated}` },
      payload: { tool: 'db_exec', arguments: args, callId: 'gated-1' },
    });
    const answer = r.json() as { error: { code: string }; approval: { id: string } };
    expect(answer).toMatchObject({ ok: false, tool: 'db_exec', error: { code: 'APPROVAL_REQUIRED' } });
    expect(await k.client.decide(answer.approval.id, { decision: 'approve', key: key.ada! })).toMatchObject({ ok: true });
    const done = await k.app.inject({ method: 'GET', url: '/v1/calls/gated-1?wait=true', headers: { authorization: `Bearer ${key.gated}` } });
    expect(done.json()).toMatchObject({ ok: true, result: { changes: 1 } });
  });

  it('a db surface agent has no DATA_* tools', async () => {
    expect(await codeOf(call('writer', 'DATA_QUERY_SQL', { sql: 'SELECT 1' }))).toBe('UNKNOWN_TOOL');
    const r = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer ${key.writer}` },
      payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } },
    });
    expect(r.json()).toMatchObject({ ok: false, error: { code: 'UNKNOWN_TOOL' } });
  });
});
