import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AwaitingAnswer, AgentDbClient } from '../../src/calls/client.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { Effect } from '../../src/contracts/effect.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';
import { withApprovalsApp } from '../helpers/approvals-app.ts';

let sb: Sandbox;
let redis: Redis;
let client: AgentDbClient;
let app: FastifyInstance;
let adaKey: string;

withApprovalsApp(
  {
    env: { APPROVAL_EFFECT_ROWS: '5' },
    members: [
      ['acme', 'ada', 'admin'],
      ['other', 'oz', 'admin'],
    ],
  },
  (box) => {
    ({ sb, redis, client, app } = box);
    adaKey = box.key.ada!;
  },
);

const free = (agent: string) => ({ workspace: 'acme', agent, settings: { database: 'agent' as const } });
const gated = (agent: string) => ({ workspace: 'acme', agent, settings: { database: 'agent' as const, approval: 'write' as const } });

async function write(agent: string, sql: string, params: unknown[] = []) {
  expect(await client.call({ ...free(agent), tool: 'DATA_WRITE_SQL', arguments: { sql, params } })).toMatchObject({ ok: true });
}

async function rows(agent: string, sql: string) {
  const env = await client.call({ ...free(agent), tool: 'DATA_QUERY_SQL', arguments: { sql } });
  return (env as unknown as { result: { rows: unknown[][] } }).result.rows;
}

async function park(agent: string, tool: string, args: Record<string, unknown>): Promise<AwaitingAnswer> {
  const answer = await client.call({ ...gated(agent), tool, arguments: args }, { wait: false });
  expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval' });
  return answer as AwaitingAnswer;
}

const getApproval = async (id: string, key = adaKey) => app.inject({ method: 'GET', url: `/v1/approvals/${id}`, headers: { authorization: `Bearer ${key}` } });

const approve = (id: string) =>
  app.inject({ method: 'POST', url: `/v1/approvals/${id}/decision`, headers: { authorization: `Bearer ${adaKey}` }, payload: { decision: 'approve' } });

const file = (agent: string) => databasePath(sb.config.dataDir, 'acme', agent, shardOf(`acme/${agent}`, sb.config.shardCount));

describe('the effect of a parked write', () => {
  it('is on the pending answer and GET /v1/approvals/:id, and parking changed nothing in the database', async () => {
    await write('fx1', 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT, company TEXT)');
    await write('fx1', "INSERT INTO leads VALUES (1, 'a@x', 'A'), (2, 'b@x', 'A'), (3, 'c@x', 'C')");
    const before = fs.readFileSync(file('fx1'));
    const wal = (f: string) => (fs.existsSync(`${f}-wal`) ? fs.readFileSync(`${f}-wal`) : Buffer.alloc(0));
    const walBefore = wal(file('fx1'));
    const parked = await park('fx1', 'DATA_WRITE_SQL', { sql: 'UPDATE leads SET company = ? WHERE company = ?', params: ['Acme', 'A'] });
    const effect = parked.approval.effect as Effect;
    expect(effect.tables).toEqual([{ table: 'leads', inserted: 0, updated: 2, deleted: 0 }]);
    expect(effect.rows).toEqual([
      { table: 'leads', op: 'update', key: { rowid: 1 }, before: { id: 1, email: 'a@x', company: 'A' }, after: { id: 1, email: 'a@x', company: 'Acme' } },
      { table: 'leads', op: 'update', key: { rowid: 2 }, before: { id: 2, email: 'b@x', company: 'A' }, after: { id: 2, email: 'b@x', company: 'Acme' } },
    ]);
    expect(await rows('fx1', 'SELECT company FROM leads ORDER BY id')).toEqual([['A'], ['A'], ['C']]);
    expect(fs.readFileSync(file('fx1')).equals(before)).toBe(true);
    expect(wal(file('fx1')).equals(walBefore)).toBe(true);

    const shown = await getApproval(parked.approval.id);
    expect(shown.statusCode).toBe(200);
    expect(shown.json().approval.effect).toEqual(effect);
    // A list keeps the counts and digest, not the rows: those are one GET away.
    const listed = await app.inject({ method: 'GET', url: '/v1/approvals?state=pending', headers: { authorization: `Bearer ${adaKey}` } });
    expect(listed.json().approvals.find((a: { id: string }) => a.id === parked.approval.id)).toMatchObject({
      cut: true,
      effect: { tables: effect.tables, rows: [], cut: true, digest: effect.digest },
    });
    // Another workspace's member reads no effect of it.
    const oz = (await new MemberRegistry(redis, keysFor(sb.config.prefix)).add('other', 'oz2', 'admin')).key;
    expect((await getApproval(parked.approval.id, oz)).statusCode).toBe(404);

    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect((await approve(parked.approval.id)).statusCode).toBe(200);
    expect(await waiting).toMatchObject({ ok: true, result: { changes: 2 } });
    expect(await rows('fx1', 'SELECT company FROM leads ORDER BY id')).toEqual([['Acme'], ['Acme'], ['C']]);
  });

  it('is superseded when another write changed the rows between parking and approval: nothing commits, and the call parks again', async () => {
    await write('fx2', 'CREATE TABLE leads (id INTEGER PRIMARY KEY, company TEXT)');
    await write('fx2', "INSERT INTO leads VALUES (1, 'A'), (2, 'B')");
    const parked = await park('fx2', 'DATA_WRITE_SQL', { sql: "DELETE FROM leads WHERE company = 'A'" });
    expect((parked.approval.effect as Effect).tables).toEqual([{ table: 'leads', inserted: 0, updated: 0, deleted: 1 }]);
    // Meanwhile another call (no approval needed) adds a row the DELETE would also take.
    await write('fx2', "INSERT INTO leads VALUES (3, 'A')");

    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect((await approve(parked.approval.id)).statusCode).toBe(200);
    await expect.poll(async () => (await getApproval(parked.approval.id)).json().approval.state).toBe('superseded');
    const old = (await getApproval(parked.approval.id)).json().approval;
    expect(old).toMatchObject({ supersededBy: expect.stringMatching(/^ap_/), ran: { ok: false, code: 'APPROVAL_STALE' } });
    expect(old.supersededBy).not.toBe(parked.approval.id);
    const next = (await getApproval(old.supersededBy)).json().approval;
    expect(next).toMatchObject({ state: 'pending', supersedes: parked.approval.id, round: 2, callId: parked.callId });
    expect(next.effect.tables).toEqual([{ table: 'leads', inserted: 0, updated: 0, deleted: 2 }]);
    expect(next.effectNote).toContain('leads: 1 deleted → 2 deleted');
    expect(await rows('fx2', 'SELECT id FROM leads ORDER BY id')).toEqual([[1], [2], [3]]);
    // The caller is told it waits again, on the new approval.
    expect(await client.result(parked.callId, whoOf(parked))).toMatchObject({ status: 'awaiting_approval', approval: { id: next.id, state: 'pending' } });
    const listed = await app.inject({ method: 'GET', url: '/v1/approvals?state=superseded', headers: { authorization: `Bearer ${adaKey}` } });
    expect(listed.json().approvals.map((a: { id: string }) => a.id)).toContain(parked.approval.id);

    expect((await approve(next.id)).statusCode).toBe(200);
    expect(await waiting).toMatchObject({ ok: true, result: { changes: 2 } });
    expect(await rows('fx2', 'SELECT id FROM leads ORDER BY id')).toEqual([[2]]);
  });

  it('binds the values a write writes: a value read from a table changed since supersedes; a created_at default and a moved rowid do not', async () => {
    await write('fx6', 'CREATE TABLE src (id INTEGER PRIMARY KEY, v TEXT)');
    await write('fx6', "INSERT INTO src VALUES (1, 'nice')");
    await write('fx6', 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, created_at TEXT DEFAULT CURRENT_TIMESTAMP, updated_at TEXT)');
    await write('fx6', "INSERT INTO t (id, v) VALUES (1, 'old')");
    const parked = await park('fx6', 'DATA_WRITE_SQL', { sql: 'UPDATE t SET v = (SELECT v FROM src WHERE id = 1) WHERE id = 1' });
    expect((parked.approval.effect as Effect).rows[0]).toMatchObject({ before: { v: 'old' }, after: { v: 'nice' } });
    // Someone who needs no approval changes what the approved write would copy.
    await write('fx6', "UPDATE src SET v = 'evil' WHERE id = 1");
    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect((await approve(parked.approval.id)).statusCode).toBe(200);
    await expect.poll(async () => (await getApproval(parked.approval.id)).json().approval.state).toBe('superseded');
    const next = (await getApproval((await getApproval(parked.approval.id)).json().approval.supersededBy)).json().approval;
    expect(next.effect.rows[0]).toMatchObject({ before: { v: 'old' }, after: { v: 'evil' } });
    expect(next.effectNote).toContain('the same counts, but other rows or values');
    expect(await rows('fx6', 'SELECT v FROM t')).toEqual([['old']]);
    expect((await approve(next.id)).statusCode).toBe(200);
    expect(await waiting).toMatchObject({ ok: true, result: { changes: 1 } });

    // What the clock makes is not bound: an insert's created_at default, an updated_at set to now.
    const insert = await park('fx6', 'DATA_WRITE_SQL', { sql: 'INSERT INTO t (v) VALUES (?)', params: ['new'] });
    const touch = await park('fx6', 'DATA_WRITE_SQL', { sql: 'UPDATE t SET updated_at = coalesce(?, CURRENT_TIMESTAMP) WHERE id = 1', params: [null] });
    await write('fx6', "INSERT INTO t (v) VALUES ('meanwhile')");
    // The second turns between the previews and the runs.
    await new Promise((resolve) => setTimeout(resolve, 1001 - (Date.now() % 1000)));
    for (const p of [insert, touch]) {
      const ran = client.result(p.callId, { ...whoOf(p), wait: true });
      expect((await approve(p.approval.id)).statusCode).toBe(200);
      expect(await ran).toMatchObject({ ok: true, result: { changes: 1 } });
    }
  });

  it('does not commit an approved write whose effect could not be shown: it parks again with the effect it has', async () => {
    await write('fx7', 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    await write('fx7', "INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    await write('fx7', 'CREATE TABLE flag (f INTEGER)');
    await write('fx7', 'INSERT INTO flag VALUES (0)');
    // Fails on today's data (integer overflow), rewrites every row once the flag moves.
    const sql = "UPDATE t SET v = CASE WHEN (SELECT f FROM flag) = 0 THEN abs(-9223372036854775807 - 1) ELSE 'optout' END";
    const parked = await park('fx7', 'DATA_WRITE_SQL', { sql });
    expect(parked.approval).toMatchObject({ effect: null, effectNote: expect.stringContaining('could not be computed') });
    await write('fx7', 'UPDATE flag SET f = 1');
    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect((await approve(parked.approval.id)).statusCode).toBe(200);
    await expect.poll(async () => (await getApproval(parked.approval.id)).json().approval.state).toBe('superseded');
    const next = (await getApproval((await getApproval(parked.approval.id)).json().approval.supersededBy)).json().approval;
    expect(next).toMatchObject({
      state: 'pending',
      effect: { tables: [{ table: 't', updated: 2 }] },
      effectNote: expect.stringContaining('could not be shown'),
    });
    expect(await rows('fx7', 'SELECT v FROM t ORDER BY id')).toEqual([['a'], ['b']]);
    expect((await approve(next.id)).statusCode).toBe(200);
    expect(await waiting).toMatchObject({ ok: true, result: { changes: 2 } });

    // A call whose effect could not be shown and that changes no rows runs once approved.
    const first = await park('fx8', 'DATA_WRITE_SQL', { sql: 'CREATE TABLE made (x)' });
    expect(first.approval).toMatchObject({ effect: null, effectNote: expect.stringContaining('does not exist yet') });
    const made = client.result(first.callId, { ...whoOf(first), wait: true });
    expect((await approve(first.approval.id)).statusCode).toBe(200);
    expect(await made).toMatchObject({ ok: true });
  });

  it('asks again about a drop whose table changed after approval, and drops it once that is approved', async () => {
    await write('fx5', 'CREATE TABLE gone (x)');
    await write('fx5', 'INSERT INTO gone VALUES (1)');
    const parked = await park('fx5', 'DATA_DROP_TABLE', { table: 'gone' });
    expect(parked.approval.effect).toMatchObject({ tables: [{ table: 'gone', deleted: 1 }], dropped: { rows: 1 } });
    await write('fx5', 'INSERT INTO gone VALUES (2)');
    const waiting = client.result(parked.callId, { ...whoOf(parked), wait: true });
    expect((await approve(parked.approval.id)).statusCode).toBe(200);
    await expect.poll(async () => (await getApproval(parked.approval.id)).json().approval.state).toBe('superseded');
    const next = (await getApproval((await getApproval(parked.approval.id)).json().approval.supersededBy)).json().approval;
    expect(next).toMatchObject({ state: 'pending', object: { rows: 2 }, effect: { tables: [{ table: 'gone', deleted: 2 }], dropped: { rows: 2 } } });
    expect(next.effectNote).toContain('gone: 1 deleted → 2 deleted');
    expect(await rows('fx5', 'SELECT count(*) FROM gone')).toEqual([[2]]);
    expect((await approve(next.id)).statusCode).toBe(200);
    expect(await waiting).toMatchObject({ ok: true, result: { dropped: 'gone' } });
  });

  it('keeps APPROVAL_EFFECT_ROWS rows and says it cut the rest; a drop shows its schema and row count', async () => {
    await write('fx3', 'CREATE TABLE n (x INTEGER)');
    await write('fx3', "INSERT INTO n SELECT value FROM json_each('[1,2,3,4,5,6,7,8]')");
    const parked = await park('fx3', 'DATA_WRITE_SQL', { sql: 'UPDATE n SET x = x + 1' });
    const effect = parked.approval.effect as Effect;
    expect(effect.tables).toEqual([{ table: 'n', inserted: 0, updated: 8, deleted: 0 }]);
    expect(effect).toMatchObject({ cut: true });
    expect(effect.rows).toHaveLength(5);
    const drop = await park('fx3', 'DATA_DROP_TABLE', { table: 'n' });
    expect(drop.approval.effect).toMatchObject({
      tables: [{ table: 'n', inserted: 0, updated: 0, deleted: 8 }],
      dropped: { type: 'table', name: 'n', rows: 8, definition: 'CREATE TABLE n (x INTEGER)' },
    });
  });
});

describe('a write whose effect takes longer than the statement time limit', () => {
  let slow: Sandbox;
  let slowClient: AgentDbClient;
  beforeAll(async () => {
    // 2 s, not less: the table's CREATE must fit in it on a loaded machine, the recursive insert never does.
    slow = sandbox({ STATEMENT_TIMEOUT_MS: '2000' });
    await slow.pool();
    slowClient = slow.client();
  });
  afterAll(() => slow.cleanup());

  it('parks with effect null and a note that says why', async () => {
    const made = await slowClient.call({ ...free('fx4'), tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE big (x INTEGER)' } });
    expect(made).toMatchObject({ ok: true });
    const answer = await slowClient.call(
      {
        ...gated('fx4'),
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'INSERT INTO big WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) SELECT x FROM c' },
      },
      { wait: false },
    );
    expect(answer).toMatchObject({
      status: 'awaiting_approval',
      approval: { effect: null, effectNote: expect.stringContaining('STATEMENT_TIMEOUT_MS') },
    });
  });
});
