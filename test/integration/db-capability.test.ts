import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db, type AgentDbClient, type DbPolicyContext, type DbTool } from '../../src/index.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
  const redis = connectRedis(REDIS_URL);
  await new MemberRegistry(redis, keysFor(sb.config.prefix)).add('cap', 'alice', 'member');
  redis.disconnect();
});
afterAll(async () => {
  await sb.cleanup();
});

const tool = (tools: DbTool[], name: string) => {
  const t = tools.find((x) => x.name === name);
  if (!t) throw new Error(`no ${name} among ${tools.map((x) => x.name).join(', ')}`);
  return t;
};

describe('db() over a client, against a running worker (db-capability.md)', () => {
  it('gives db_query and db_schema in read mode, db_exec too in a write mode, with the documented schemas', () => {
    const read = db({ client, workspace: 'cap', agent: 'reader' });
    expect(read.map((t) => [t.name, t.inputSchema])).toEqual([
      [
        'db_query',
        {
          additionalProperties: false,
          properties: { statement: { type: 'string' }, as_of: expect.objectContaining({ type: 'string' }) },
          type: 'object',
          required: ['statement'],
        },
      ],
      ['db_schema', { additionalProperties: false, properties: {}, type: 'object' }],
    ]);
    const write = db({ client, workspace: 'cap', agent: 'reader', schemaMode: 'write' });
    expect(write.map((t) => t.name)).toEqual(['db_exec', 'db_query', 'db_schema']);
    expect(tool(write, 'db_exec').inputSchema).toEqual({
      additionalProperties: false,
      properties: { rationale: { type: 'string' }, statement: { type: 'string' } },
      type: 'object',
      required: ['statement', 'rationale'],
    });
    expect(tool(write, 'db_exec').description).toContain('Requires rationale');
  });

  it('names a database it does not have at once', () => {
    expect(() => db({ client, workspace: 'cap', agent: 'x', database: 'analytics' })).toThrow('Database "analytics" is not available');
  });

  it('runs DDL only in schema write mode and data changes only in write mode; reads and describes', async () => {
    const architect = db({ client, workspace: 'cap', agent: 'rw', schemaMode: 'write' });
    const writer = db({ client, workspace: 'cap', agent: 'rw', mode: 'write' });
    const create = { statement: 'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)', rationale: 'a table for items' };
    expect(await tool(writer, 'db_exec').execute(create)).toMatchObject({ ok: false, tool: 'db_exec', error: { code: 'NOT_PERMITTED' } });
    expect(await tool(architect, 'db_exec').execute(create)).toMatchObject({ ok: true, tool: 'db_exec' });
    const insert = { statement: "INSERT INTO items (name) VALUES ('pen')", rationale: 'stock' };
    expect(await tool(architect, 'db_exec').execute(insert)).toMatchObject({ ok: false, error: { code: 'NOT_PERMITTED' } });
    expect(await tool(writer, 'db_exec').execute(insert)).toMatchObject({ ok: true });

    const rows = await tool(writer, 'db_query').execute({ statement: 'SELECT name FROM items' });
    expect(rows).toMatchObject({ ok: true, tool: 'db_query', result: { rows: [['pen']] } });
    expect(await tool(writer, 'db_query').execute({ statement: 'PRAGMA table_info(items)' })).toMatchObject({ ok: true });
    const described = await tool(writer, 'db_schema').execute({});
    expect(described).toMatchObject({ ok: true, tool: 'db_schema', result: { database: 'cap/rw' } });
    expect(JSON.stringify(described)).toContain('items');
  });

  it('refuses what the agent got wrong with a code it can act on, before it reaches the database', async () => {
    const writer = db({ client, workspace: 'cap', agent: 'wrong', mode: 'write' });
    const exec = tool(writer, 'db_exec');
    expect(await exec.execute({ statement: 'CREATE TABLE t (a)', rationale: '  ' })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
    expect(await exec.execute({ statement: 'SELECT 1', rationale: 'x' })).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
    expect(await exec.execute({ statement: 'INSERT INTO t VALUES (1); DELETE FROM t', rationale: 'x' })).toMatchObject({ ok: false });
    expect(await exec.execute({ statement: 'INSERT INTO t VALUES (1)' })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
    expect(await tool(writer, 'db_query').execute({ statement: 'SELECT 1; SELECT 2' })).toMatchObject({ ok: false, tool: 'db_query' });
    expect(await tool(writer, 'db_query').execute({ statement: 'SELECT 1', extra: true })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
  });

  it('applies a fixed policy to db_exec only: deny, retryable-failure', async () => {
    const denied = db({ client, workspace: 'cap', agent: 'denied', mode: 'write', policy: 'deny' });
    expect(await tool(denied, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (1)', rationale: 'x' })).toMatchObject({
      ok: false,
      error: { code: 'NOT_PERMITTED' },
    });
    expect(await tool(denied, 'db_query').execute({ statement: 'SELECT 1 AS one' })).toMatchObject({ ok: true, result: { rows: [[1]] } });
    const flaky = db({ client, workspace: 'cap', agent: 'flaky', mode: 'write', policy: 'retryable-failure' });
    expect(await tool(flaky, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (1)', rationale: 'x' })).toMatchObject({
      ok: false,
      error: { code: 'RETRY_LATER' },
    });
  });

  it('require-approval answers APPROVAL_REQUIRED at once with the request; approved, the write runs', async () => {
    await tool(db({ client, workspace: 'cap', agent: 'gated', schemaMode: 'write' }), 'db_exec').execute({
      statement: 'CREATE TABLE t (a)',
      rationale: 'setup',
    });
    const gated = db({ client, workspace: 'cap', agent: 'gated', mode: 'write', policy: 'require-approval' });
    const answer = await tool(gated, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (42)', rationale: 'the answer' }, { callId: 'gated-1' });
    expect(answer).toMatchObject({
      ok: false,
      callId: 'gated-1',
      tool: 'db_exec',
      error: { code: 'APPROVAL_REQUIRED' },
      approval: { statement: 'INSERT INTO t VALUES (42)', rationale: 'the answer' },
    });
    const approvalId = (answer as { approval: { id: string } }).approval.id;
    expect(await client.decide(approvalId, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
    expect(await client.result('gated-1', { workspace: 'cap', agent: 'gated', wait: true })).toMatchObject({ ok: true });
    expect(await tool(gated, 'db_query').execute({ statement: 'SELECT a FROM t' })).toMatchObject({ ok: true, result: { rows: [[42]] } });
  });

  it('asks a policy function, sync or async, for each db_exec call that passed the checks', async () => {
    await tool(db({ client, workspace: 'cap', agent: 'fn', schemaMode: 'write' }), 'db_exec').execute({ statement: 'CREATE TABLE t (a)', rationale: 'setup' });
    const asked: DbPolicyContext[] = [];
    const sync = db({
      client,
      workspace: 'cap',
      agent: 'fn',
      mode: 'write',
      policy: (ctx) => {
        asked.push(ctx);
        return /^\s*delete/i.test(ctx.input.statement) ? 'deny' : 'allow';
      },
    });
    expect(await tool(sync, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (1)', rationale: 'one' })).toMatchObject({ ok: true });
    expect(await tool(sync, 'db_exec').execute({ statement: 'DELETE FROM t', rationale: 'clean' })).toMatchObject({
      ok: false,
      error: { code: 'NOT_PERMITTED' },
    });
    // Checks first: a read in db_exec is refused without asking, and reads are never asked about.
    expect(await tool(sync, 'db_exec').execute({ statement: 'SELECT 1', rationale: 'x' })).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
    await tool(sync, 'db_query').execute({ statement: 'SELECT 1' });
    expect(asked).toEqual([
      { name: 'db_exec', input: { statement: 'INSERT INTO t VALUES (1)', rationale: 'one' } },
      { name: 'db_exec', input: { statement: 'DELETE FROM t', rationale: 'clean' } },
    ]);

    const later = db({ client, workspace: 'cap', agent: 'fn', mode: 'write', policy: async () => 'require-approval' as const });
    expect(await tool(later, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (2)', rationale: 'two' })).toMatchObject({
      ok: false,
      error: { code: 'APPROVAL_REQUIRED' },
    });
    const flaky = db({ client, workspace: 'cap', agent: 'fn', mode: 'write', policy: async () => 'retryable-failure' as const });
    expect(await tool(flaky, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (3)', rationale: 'three' })).toMatchObject({
      ok: false,
      error: { code: 'RETRY_LATER' },
    });
    const broken = db({ client, workspace: 'cap', agent: 'fn', mode: 'write', policy: () => 'yes' as never });
    await expect(tool(broken, 'db_exec').execute({ statement: 'INSERT INTO t VALUES (4)', rationale: 'four' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENTS',
      message: expect.stringContaining('the policy function returned "yes"'),
    });
    expect(await tool(sync, 'db_query').execute({ statement: 'SELECT a FROM t ORDER BY a' })).toMatchObject({ ok: true, result: { rows: [[1]] } });
  });

  it('uses the workspace database when asked', async () => {
    const shared = db({ client, workspace: 'cap', agent: 'fn', database: 'workspace' });
    expect(await tool(shared, 'db_schema').execute({})).toMatchObject({ ok: true, result: { database: 'cap' } });
  });

  it('database "workspace" reads and writes the shared tables, not the agent\'s own', async () => {
    const shared = db({ client, workspace: 'cap', agent: 'sw', database: 'workspace', schemaMode: 'write', settings: { sharedData: true } });
    expect(await tool(shared, 'db_exec').execute({ statement: 'CREATE TABLE shared_only (v)', rationale: 'a shared table' })).toMatchObject({ ok: true });
    const other = db({ client, workspace: 'cap', agent: 'another', database: 'workspace' });
    expect(await tool(other, 'db_query').execute({ statement: 'SELECT count(*) FROM shared_only' })).toMatchObject({ ok: true, result: { rows: [[0]] } });
    const own = db({ client, workspace: 'cap', agent: 'sw' });
    expect(await tool(own, 'db_query').execute({ statement: 'SELECT count(*) FROM shared_only' })).toMatchObject({ ok: false, error: { code: 'SQL_ERROR' } });
  });
});
