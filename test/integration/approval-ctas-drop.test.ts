import type { FastifyInstance } from 'fastify';
import { expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import type { Effect } from '../../src/contracts/effect.ts';
import { whoOf } from '../helpers/who.ts';
import { withApprovalsApp } from '../helpers/approvals-app.ts';

// Session 32, R6: approvals of a CREATE TABLE … AS SELECT and of a drop, end to end through the
// client (the path the MCP tools and `agentdb call` take), the worker and the approval routes.

let client: AgentDbClient;
let app: FastifyInstance;
let adaKey: string;

withApprovalsApp({ members: [['acme', 'ada', 'admin']] }, (box) => {
  ({ client, app } = box);
  adaKey = box.key.ada!;
});

const free = (agent: string) => ({ workspace: 'acme', agent, settings: { database: 'agent' as const } });
const gated = (agent: string) => ({ workspace: 'acme', agent, settings: { database: 'agent' as const, approval: 'write' as const } });

async function write(agent: string, sql: string) {
  expect(await client.call({ ...free(agent), tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject({ ok: true });
}

const approve = (id: string) =>
  app.inject({ method: 'POST', url: `/v1/approvals/${id}/decision`, headers: { authorization: `Bearer ${adaKey}` }, payload: { decision: 'approve' } });

it('runs an approved CREATE TABLE … AS SELECT of random() and the clock once approved, as the rows it showed', async () => {
  await write('ctas1', 'CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)');
  await write('ctas1', "INSERT INTO t VALUES (1, 'one'), (2, 'two')");
  const sql = "CREATE TABLE tok AS SELECT a, b, lower(hex(randomblob(8))) AS token, datetime('now') AS at FROM t";
  const parked = (await client.call({ ...gated('ctas1'), tool: 'DATA_WRITE_SQL', arguments: { sql } }, { wait: false })) as AwaitingAnswer;
  expect(parked).toMatchObject({ ok: false, status: 'awaiting_approval' });
  const effect = parked.approval.effect as Effect;
  expect(effect.tables).toEqual([{ table: 'tok', inserted: 2, updated: 0, deleted: 0 }]);
  expect(effect.rows.map((r) => r.after?.b)).toEqual(['one', 'two']);
  expect((await approve(parked.approval.id)).statusCode).toBe(200);
  // On main: APPROVAL_STALE, parked again with new random values, at every approval.
  const shown = async () =>
    (await app.inject({ method: 'GET', url: `/v1/approvals/${parked.approval.id}`, headers: { authorization: `Bearer ${adaKey}` } })).json().approval;
  await expect.poll(async () => (await shown()).ran !== undefined).toBe(true);
  expect((await shown()).ran).toMatchObject({ ok: true });
  expect(await client.result(parked.callId, { ...whoOf(parked), wait: true })).toMatchObject({ ok: true });
  const made = await client.call({ ...free('ctas1'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT b FROM tok ORDER BY a' } });
  expect(made).toMatchObject({ ok: true, result: { rows: [['one'], ['two']] } });
});

it('refuses a drop whose foreign keys would cascade before anyone is asked, saying what to do first', async () => {
  await write('drop1', 'CREATE TABLE p (id INTEGER PRIMARY KEY)');
  await write('drop1', 'CREATE TABLE c (pid REFERENCES p(id) ON DELETE CASCADE)');
  await write('drop1', 'INSERT INTO p VALUES (1)');
  await write('drop1', 'INSERT INTO c VALUES (1)');
  const answer = await client.call({ ...gated('drop1'), tool: 'DATA_DROP_TABLE', arguments: { table: 'p' } }, { wait: false });
  // On main: SQL_REFUSED, whose hint told an agent that had used DATA_DROP_TABLE to use DATA_DROP_TABLE.
  expect(answer).toMatchObject({ ok: false, error: { code: 'DROP_REFERENCED', hint: expect.stringMatching(/first, then drop/) } });
  expect((answer as { error: { message: string } }).error.message).toMatch(/rows of "c" refer to "p" through their foreign keys.*Delete those rows.*first/i);
  const pending = await app.inject({ method: 'GET', url: '/v1/approvals?state=pending', headers: { authorization: `Bearer ${adaKey}` } });
  expect(pending.json().approvals.filter((a: { agent?: string }) => a.agent === 'drop1')).toEqual([]);
});
