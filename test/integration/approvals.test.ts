import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { MemberRegistry } from '../../src/registry/members.ts';
import { databaseId, databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import type { AgentDbClient, AwaitingAnswer, CallAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';

let sb: Sandbox;
let client: AgentDbClient;
let members: MemberRegistry;
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '8' });
  await sb.pool();
  client = sb.client();
  members = new MemberRegistry(redis, keysFor(sb.config.prefix));
  await members.add('acme', 'alice', 'member');
  await members.add('acme', 'bob', 'member');
  await members.add('acme', 'root', 'admin');
  await members.add('other', 'eve', 'admin');
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

const gated = { workspace: 'acme', settings: { database: 'workspace' as const, approval: 'write' as const, sharedData: true } };

async function park(agent: string, tool: string, args: unknown, extra: Partial<CallInput> = {}): Promise<AwaitingAnswer> {
  const answer = await client.call({ ...gated, agent, tool, arguments: args, ...extra }, { wait: false });
  expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval', approval: { tier: expect.any(String) } });
  return answer as AwaitingAnswer;
}

async function run(agent: string, sql: string, params: unknown[] = []) {
  const env = await client.call({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql, params } });
  if (!env.ok) throw new Error(JSON.stringify(env));
  return (env as unknown as { result: { rows: unknown[][] } }).result.rows;
}

async function make(agent: string, sql: string) {
  expect(await client.call({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject({
    ok: true,
  });
}

describe('parking', () => {
  it('parks a write with approval: "write", and runs it once approved, delivering the result to whoever waits', async () => {
    await make('ap1', 'CREATE TABLE leads (email TEXT)');
    const parked = await park('ap1', 'DATA_WRITE_SQL', { sql: 'INSERT INTO leads VALUES (?) RETURNING email', params: ['ada@x.io'], rationale: 'new lead' });
    expect(parked.approval).toMatchObject({ id: expect.stringMatching(/^ap_[A-Za-z0-9_-]{24}$/), tier: 'write', expiresAt: expect.stringMatching(/Z$/) });
    expect(await run('ap1', 'SELECT count(*) FROM leads')).toEqual([[0]]);
    expect(await client.result(parked.callId, whoOf(parked))).toMatchObject({ status: 'awaiting_approval' });

    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    const decided = await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true, reason: 'looks right' });
    expect(decided).toMatchObject({ ok: true, approval: { state: 'approved', decidedBy: 'alice', reason: 'looks right' } });
    expect(await waiting).toMatchObject({ ok: true, callId: parked.callId, credits: 2, result: { changes: 1, rows: [['ada@x.io']] } });
    expect(await run('ap1', 'SELECT email FROM leads')).toEqual([['ada@x.io']]);
    await expect.poll(async () => (await decidedApproval(parked.approval.id))?.ran).toMatchObject({ ok: true });
  });

  it('finishes a rejected call with APPROVAL_REJECTED and the reason, having run nothing', async () => {
    await make('ap2', 'CREATE TABLE t (x)');
    const parked = await park('ap2', 'DATA_WRITE_SQL', { sql: 'INSERT INTO t VALUES (1)' });
    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect(await client.decide(parked.approval.id, { decision: 'reject', by: 'bob', operator: true, reason: 'not today' })).toMatchObject({ ok: true });
    const env = await waiting;
    expect(env).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
    expect((env as { error: { message: string } }).error.message).toBe('A person rejected this call; it did not run. Rejected by bob: not today.');
    expect(await run('ap2', 'SELECT count(*) FROM t')).toEqual([[0]]);
  });

  it('parks every drop whatever the setting, and drops once approved', async () => {
    await make('ap3', 'CREATE TABLE gone (x)');
    const parked = await park('ap3', 'DATA_DROP_TABLE', { table: 'gone' }, { settings: { database: 'agent' } });
    expect(parked.approval.tier).toBe('destructive');
    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true });
    expect(await waiting).toMatchObject({ ok: true, result: { dropped: 'gone' } });
  });

  it('never asks a person about a call that would be refused', async () => {
    const refused = await client.call({ ...gated, agent: 'ap4', tool: 'DATA_WRITE_SQL', arguments: { sql: 'PRAGMA writable_schema = 1' } }, { wait: false });
    expect(refused).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
    const sandboxed = await client.call(
      { workspace: 'acme', agent: 'ap4', settings: { database: 'agent', sandbox: true }, tool: 'DATA_DROP_TABLE', arguments: { table: 'x' } },
      { wait: false },
    );
    expect(sandboxed).toMatchObject({ ok: false, error: { code: 'SANDBOX_REFUSED' } });
    const pending = await sb.client().call({ ...gated, agent: 'ap4', tool: 'DATA_DESCRIBE_SCHEMA' });
    expect(pending).toMatchObject({ ok: true });
  });

  it('answers a drop of a table that does not exist with NOT_FOUND at once, asking nobody', async () => {
    await make('ap6', 'CREATE TABLE kept (x)');
    for (const [agent, table] of [
      ['ap6', 'missing'],
      ['ap6', '../kept'],
      ['ap6-never-written', 'kept'],
    ] as const) {
      const answer = await client.call(
        { workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_DROP_TABLE', arguments: { table } },
        { wait: false },
      );
      expect(answer, `${agent} ${table}`).toMatchObject({ ok: false, error: { code: 'NOT_FOUND', message: expect.stringContaining(JSON.stringify(table)) } });
      expect(await client.result(answer.callId, { workspace: 'acme', agent })).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
      // There is no approval to decide.
      expect(await client.decide(`ap_${answer.callId}`, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    }
    // The table that does exist is still there, and still takes a person to drop.
    expect(await run('ap6', 'SELECT count(*) FROM kept')).toEqual([[0]]);
    await park('ap6', 'DATA_DROP_TABLE', { table: 'KEPT' }, { settings: { database: 'agent' } });
  });
});

describe('audit', () => {
  it('keeps every decision in the database’s own audit table, hidden from the agent', async () => {
    const rowsOf = (agent: string) => {
      const id = databaseId('acme', agent);
      const db = new Database(databasePath(sb.dataDir, 'acme', agent, shardOf(id, sb.config.shardCount)), { readonly: true });
      try {
        return db.prepare('SELECT tool, statement, decision, decided_by, decided_via, reason, ran_ok, ran_code FROM _agentdb_audit').all();
      } finally {
        db.close();
      }
    };
    await expect
      .poll(() => rowsOf('ap1'))
      .toEqual([
        {
          tool: 'DATA_WRITE_SQL',
          statement: 'INSERT INTO leads VALUES (?) RETURNING email',
          decision: 'approved',
          decided_by: 'alice',
          decided_via: 'operator',
          reason: 'looks right',
          ran_ok: 1,
          ran_code: null,
        },
      ]);
    await expect
      .poll(() => rowsOf('ap2'))
      .toEqual([
        {
          tool: 'DATA_WRITE_SQL',
          statement: 'INSERT INTO t VALUES (1)',
          decision: 'rejected',
          decided_by: 'bob',
          decided_via: 'operator',
          reason: 'not today',
          ran_ok: null,
          ran_code: null,
        },
      ]);
    const described = await client.call({ workspace: 'acme', agent: 'ap1', settings: { database: 'agent' }, tool: 'DATA_DESCRIBE_SCHEMA' });
    expect((described as unknown as { result: { tables: { name: string }[] } }).result.tables.map((t) => t.name)).toEqual(['leads']);
    const peek = await client.call({
      workspace: 'acme',
      agent: 'ap1',
      settings: { database: 'agent' },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT * FROM _agentdb_audit' },
    });
    expect(peek).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
  });
});

describe('who decides', () => {
  it('refuses unknown members, other workspaces and plain members on shared drops; the call stays parked', async () => {
    const create = await park('ap5', 'DATA_WRITE_SQL', { sql: 'CREATE TABLE shared_t (x)', scope: 'workspace' });
    await client.decide(create.approval.id, { decision: 'approve', by: 'alice', operator: true });
    // Run before the drop is asked for: a drop of a table not there yet answers NOT_FOUND, parking nothing.
    expect(await client.result(create.callId, { ...whoOf(create), wait: true })).toMatchObject({ ok: true });
    const drop = await park('ap5', 'DATA_DROP_TABLE', { table: 'shared_t', scope: 'workspace' });
    expect(await client.decide(drop.approval.id, { decision: 'approve', by: 'nobody', operator: true })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(await client.decide(drop.approval.id, { decision: 'approve', by: 'eve', operator: true })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(await client.decide(drop.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(await client.decide('ap_missing', { decision: 'approve', by: 'root', operator: true })).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    expect(await client.decide(drop.approval.id, { decision: 'maybe' as 'approve', by: 'root', operator: true })).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENTS',
    });
    expect(await client.result(drop.callId, whoOf(drop))).toMatchObject({ status: 'awaiting_approval' });
    const waiting = client.result(drop.callId, { ...whoOf(drop), wait: true });
    expect(await client.decide(drop.approval.id, { decision: 'approve', by: 'root', operator: true })).toMatchObject({ ok: true });
    expect(await waiting).toMatchObject({ ok: true, result: { dropped: 'shared_t' } });
  });

  it('lets exactly one of two racing decisions win, for each of 100 calls', async () => {
    await make('racer', 'CREATE TABLE r (i INTEGER)');
    const parked = await Promise.all(Array.from({ length: 100 }, (_, i) => park('racer', 'DATA_WRITE_SQL', { sql: 'INSERT INTO r VALUES (?)', params: [i] })));
    const outcomes = parked.map((p) => client.result(p.callId, { ...whoOf(p), wait: true }));
    const decisions = await Promise.all(
      parked.map((p) =>
        Promise.all([
          client.decide(p.approval.id, { decision: 'approve', by: 'alice', operator: true }),
          client.decide(p.approval.id, { decision: 'reject', by: 'bob', operator: true }),
        ]),
      ),
    ).then(async (pairs) => {
      const ends = await Promise.all(outcomes);
      return pairs.map((pair, i) => ({ pair, end: ends[i]! }));
    });
    let approved = 0;
    for (const { pair, end } of decisions) {
      const winners = pair.filter((d) => d.ok);
      expect(winners).toHaveLength(1);
      expect(pair.find((d) => !d.ok)).toMatchObject({ code: 'APPROVAL_CONFLICT' });
      const approvedWon = winners[0] === pair[0];
      approved += approvedWon ? 1 : 0;
      expect(end.ok).toBe(approvedWon);
    }
    expect(await run('racer', 'SELECT count(*) FROM r')).toEqual([[approved]]);
  });
});

describe('spread and events', () => {
  it('parks calls across many shards and runs each once approved', async () => {
    const agents = Array.from({ length: 24 }, (_, i) => `spread-${i}`);
    await Promise.all(agents.map((a) => make(a, 'CREATE TABLE s (x)')));
    const parked = await Promise.all(agents.map((a) => park(a, 'DATA_WRITE_SQL', { sql: 'INSERT INTO s VALUES (1)' })));
    expect(new Set(parked.map((p) => p.callId)).size).toBe(24);
    const ends = parked.map((p) => client.result(p.callId, { ...whoOf(p), wait: true }));
    await Promise.all(parked.map((p) => client.decide(p.approval.id, { decision: 'approve', by: 'alice', operator: true })));
    expect((await Promise.all(ends)).every((e: CallAnswer) => e.ok)).toBe(true);
    for (const a of agents) expect(await run(a, 'SELECT count(*) FROM s')).toEqual([[1]]);
  });

  it('publishes approval.requested, approval.decided and call.completed to a second client', async () => {
    const watcher = sb.client();
    const feed = watcher.events();
    await make('ev', 'CREATE TABLE e (x)');
    const parked = await park('ev', 'DATA_WRITE_SQL', { sql: 'INSERT INTO e VALUES (1)' });
    await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true });
    const seen: string[] = [];
    for await (const event of feed) {
      if (event.callId !== parked.callId) continue;
      seen.push(event.type);
      if (event.type === 'call.completed') break;
    }
    expect(seen).toEqual(['approval.requested', 'approval.decided', 'call.completed']);
    const replay: string[] = [];
    for await (const event of watcher.events({ from: '0' })) {
      if (event.callId === parked.callId) replay.push(event.type);
      if (event.callId === parked.callId && event.type === 'call.completed') break;
    }
    expect(replay).toEqual(seen);
  });
});

async function decidedApproval(id: string) {
  const { ApprovalStore } = await import('../../src/approvals/approval-store.ts');
  return new ApprovalStore(redis, keysFor(sb.config.prefix)).get(id);
}
