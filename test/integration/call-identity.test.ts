import Database from 'better-sqlite3';
import { Queue } from 'bullmq';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { AgentDbClient, AwaitingAnswer, CallAnswer } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { databaseId, databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { whoOf } from '../helpers/who.ts';

// A hostile tenant reusing another tenant's call ids (issue 8): ids like `<agent>-<step>` repeat
// across workspaces, and must never reach another caller's approval, result or audit row.

let sb: Sandbox;
let client: AgentDbClient;
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const keyOf: Record<string, string> = {};

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '2' });
  await sb.pool();
  client = sb.client();
  const members = new MemberRegistry(redis, keysFor(sb.config.prefix));
  for (const ws of ['w1', 'w2', 'w3', 'w4', 'w5', 'p1', 'p2', 'p3']) {
    keyOf[ws] = (await members.add(ws, 'member', 'member')).key;
    keyOf[`${ws}-admin`] = (await members.add(ws, 'boss', 'admin')).key;
  }
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

const gated = (workspace: string, agent: string): Omit<CallInput, 'tool'> => ({ workspace, agent, settings: { database: 'agent', approval: 'write' } });
const plain = (workspace: string, agent: string): Omit<CallInput, 'tool'> => ({ workspace, agent, settings: { database: 'agent' } });

function parked(answer: CallAnswer): AwaitingAnswer {
  expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval' });
  return answer as AwaitingAnswer;
}

function tablesOf(workspace: string, agent: string): string[] {
  const id = databaseId(workspace, agent);
  const file = databasePath(sb.dataDir, workspace, agent, shardOf(id, sb.config.shardCount));
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch {
    return [];
  }
  try {
    return (db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE '\\_agentdb%' ESCAPE '\\'`).pluck().all() as string[]).sort();
  } finally {
    db.close();
  }
}

function auditOf(workspace: string, agent: string): { call_id: string; statement: string }[] {
  const id = databaseId(workspace, agent);
  let db: Database.Database;
  try {
    db = new Database(databasePath(sb.dataDir, workspace, agent, shardOf(id, sb.config.shardCount)), { readonly: true, fileMustExist: true });
  } catch {
    return [];
  }
  try {
    const has = db.prepare("SELECT 1 FROM sqlite_schema WHERE name = '_agentdb_audit'").get();
    return has ? (db.prepare('SELECT call_id, statement FROM _agentdb_audit ORDER BY call_id').all() as { call_id: string; statement: string }[]) : [];
  } finally {
    db.close();
  }
}

describe('a call id in another workspace is another call', () => {
  it('an approved write does not let another workspace run its own write under the same id', async () => {
    const first = parked(
      await client.call({ ...gated('w1', 'a'), callId: 'dup-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (b TEXT)' } }, { wait: false }),
    );
    const done = client.result('dup-1', { workspace: 'w1', agent: 'a', wait: true });
    expect(await client.decide(first.approval.id, { decision: 'approve', key: keyOf.w1! })).toMatchObject({ ok: true });
    expect(await done).toMatchObject({ ok: true });

    const impostor = await client.call(
      { ...gated('w3', 'm'), callId: 'dup-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE ran_without_approval (x)' } },
      { wait: false },
    );
    const own = parked(impostor);
    expect(own.approval.id).not.toBe(first.approval.id);
    expect(own.approval).toMatchObject({ workspace: 'w3', agent: 'm', state: 'pending' });
    expect(tablesOf('w3', 'm')).toEqual([]);
    // w1's member cannot decide it either: it is not theirs to see.
    expect(await client.decide(own.approval.id, { decision: 'approve', key: keyOf.w1! })).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    expect(await client.result('dup-1', { workspace: 'w3', agent: 'm' })).toMatchObject({ status: 'awaiting_approval' });
    // w1/a's audit holds only its own decision.
    await expect.poll(() => auditOf('w1', 'a')).toEqual([{ call_id: callKey('w1', 'a', 'dup-1'), statement: 'CREATE TABLE t (b TEXT)' }]);
  });

  it("a member's approval of a write does not stand in for an admin's approval of a shared drop", async () => {
    const write = parked(
      await client.call({ ...gated('w1', 'a'), callId: 'dup-drop', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE u (x)' } }, { wait: false }),
    );
    const done = client.result('dup-drop', { workspace: 'w1', agent: 'a', wait: true });
    await client.decide(write.approval.id, { decision: 'approve', key: keyOf.w1! });
    expect(await done).toMatchObject({ ok: true });

    expect(
      await client.call({
        workspace: 'w4',
        agent: 'z',
        settings: { database: 'workspace', sharedData: true },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE shared_t (x)', scope: 'workspace' },
      }),
    ).toMatchObject({ ok: true });
    const drop = parked(
      await client.call(
        {
          workspace: 'w4',
          agent: 'z',
          settings: { database: 'workspace', sharedData: true },
          callId: 'dup-drop',
          tool: 'DATA_DROP_TABLE',
          arguments: { table: 'shared_t', scope: 'workspace' },
        },
        { wait: false },
      ),
    );
    expect(drop.approval).toMatchObject({ workspace: 'w4', tier: 'destructive', state: 'pending' });
    expect(await client.decide(drop.approval.id, { decision: 'approve', key: keyOf.w4! })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(await client.result('dup-drop', { workspace: 'w4', agent: 'z' })).toMatchObject({ status: 'awaiting_approval' });
  });

  it('a pending call under the same id in another workspace gets its own approval, which its own members see and decide', async () => {
    const w1 = parked(
      await client.call({ ...gated('w1', 'b'), callId: 'dup-2', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE from_w1 (x)' } }, { wait: false }),
    );
    const w2 = parked(
      await client.call({ ...gated('w2', 'b'), callId: 'dup-2', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE from_w2 (x)' } }, { wait: false }),
    );
    expect(w2.approval.id).not.toBe(w1.approval.id);
    const service = await pendingOf('w2');
    expect(service.map((a) => [a.id, a.sql])).toEqual([[w2.approval.id, 'CREATE TABLE from_w2 (x)']]);

    const w1done = client.result('dup-2', { workspace: 'w1', agent: 'b', wait: true });
    await client.decide(w1.approval.id, { decision: 'approve', key: keyOf.w1! });
    expect(await w1done).toMatchObject({ ok: true });
    expect(tablesOf('w1', 'b')).toEqual(['from_w1']);
    // w2's statement did not run with w1's approval.
    expect(tablesOf('w2', 'b')).toEqual([]);
    expect(await client.result('dup-2', { workspace: 'w2', agent: 'b' })).toMatchObject({ status: 'awaiting_approval' });
  });

  it("a rejection's reviewer and reason reach only the call they were given for", async () => {
    const w1 = parked(
      await client.call({ ...gated('w1', 'c'), callId: 'dup-3', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE nope (x)' } }, { wait: false }),
    );
    const done = client.result('dup-3', { workspace: 'w1', agent: 'c', wait: true });
    await client.decide(w1.approval.id, { decision: 'reject', key: keyOf.w1!, reason: 'w1 internal: the merger is secret' });
    expect(await done).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });

    const other = await client.call(
      { ...gated('w3', 'c'), callId: 'dup-3', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE nope (x)' } },
      { wait: false },
    );
    expect(JSON.stringify(other)).not.toContain('merger');
    parked(other);
    expect(JSON.stringify(await client.result('dup-3', { workspace: 'w3', agent: 'c' }))).not.toContain('merger');
  });

  it("on one shard, the same id answers each caller with their own call's result", async () => {
    // Two databases on the same shard of two: find a pair.
    const ws = ['w1', 'w2', 'w3', 'w4', 'w5'].find((w) => shardOf(databaseId(w, 'r'), 2) === shardOf(databaseId('w5', 's'), 2) && w !== 'w5')!;
    const mine = await client.call({ ...plain(ws, 'r'), callId: 'dup-4', tool: 'DATA_QUERY_SQL', arguments: { sql: "SELECT 'secret of the first'" } });
    expect(mine).toMatchObject({ ok: true, result: { rows: [['secret of the first']] } });
    const theirs = await client.call({ ...plain('w5', 's'), callId: 'dup-4', tool: 'DATA_QUERY_SQL', arguments: { sql: "SELECT 'their own'" } });
    expect(theirs).toMatchObject({ ok: true, result: { rows: [['their own']] } });
    expect(await client.result('dup-4', { workspace: 'w5', agent: 's' })).toMatchObject({ result: { rows: [['their own']] } });
    expect(await client.result('dup-4', { workspace: 'w5', agent: 'nobody' })).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
  });
});

describe('a call id is an idempotency key in its caller’s namespace', () => {
  it('the same call again answers the first outcome and runs nothing; another call under the id is refused, naming what differs', async () => {
    const who = { ...plain('w1', 'idem'), callId: 'step-1' };
    await client.call({ ...plain('w1', 'idem'), tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE n (i INTEGER PRIMARY KEY, v TEXT)' } });
    const first = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO n (v) VALUES (?)', params: ['a'] } });
    expect(first).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO n (v) VALUES (?)', params: ['a'] } })).toEqual(first);
    const other = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO n (v) VALUES (?)', params: ['b'] } });
    expect(other).toMatchObject({ ok: false, callId: 'step-1', error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining('arguments.params') } });
    const count = await client.call({ ...plain('w1', 'idem'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM n' } });
    expect(count).toMatchObject({ ok: true, result: { rows: [['a']] } });
    // The stored outcome is still the first call's.
    expect(await client.result('step-1', { workspace: 'w1', agent: 'idem' })).toEqual(first);
  });

  it('a parked call sent again answers that it waits, under the same approval', async () => {
    const args = { sql: 'CREATE TABLE again (x)' };
    const first = parked(await client.call({ ...gated('w1', 'idem2'), callId: 'p-1', tool: 'DATA_WRITE_SQL', arguments: args }, { wait: false }));
    const second = parked(await client.call({ ...gated('w1', 'idem2'), callId: 'p-1', tool: 'DATA_WRITE_SQL', arguments: args }, { wait: false }));
    expect(second.approval.id).toBe(first.approval.id);
    expect((await pendingOf('w1')).filter((a) => a.callId === 'p-1')).toHaveLength(1);
  });
});

describe('an approval is bound to its call', () => {
  it('a raw job carrying another call’s approvalId is not run on it: it is parked for its own', async () => {
    const victim = parked(
      await client.call(
        { ...gated('w1', 'v'), callId: 'forge-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE approved_one (x)' } },
        { wait: false },
      ),
    );
    const done = client.result('forge-1', { workspace: 'w1', agent: 'v', wait: true });
    await client.decide(victim.approval.id, { decision: 'approve', key: keyOf.w1! });
    expect(await done).toMatchObject({ ok: true });

    const data = {
      callId: 'forged',
      workspace: 'w2',
      agent: 'x',
      settings: { database: 'agent', approval: 'write', sandbox: false, sharedData: false },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE forged_table (x)' },
      enqueuedAt: Date.now(),
      approvalId: victim.approval.id,
    };
    const shard = shardOf(databaseId('w2', 'x'), sb.config.shardCount);
    const queue = new Queue(`{shard-${shard}}`, { connection: redis, prefix: sb.config.prefix });
    try {
      await queue.add('call', data, { jobId: callKey('w2', 'x', 'forged') });
      await expect.poll(() => client.result('forged', { workspace: 'w2', agent: 'x' })).toMatchObject({ status: 'awaiting_approval' });
      expect(tablesOf('w2', 'x')).toEqual([]);

      // A job whose id names another call is refused outright.
      await queue.add('call', { ...data, callId: 'misnamed' }, { jobId: callKey('w1', 'v', 'forge-2') });
      await expect.poll(async () => (await queue.getJob(callKey('w1', 'v', 'forge-2')))?.returnvalue).toMatchObject({ ok: false, error: { code: 'INTERNAL' } });
      expect(tablesOf('w2', 'x')).toEqual([]);
    } finally {
      await queue.close();
    }
  });

  it('a drop whose table was renamed away since approval drops nothing and asks again about the table there now', async () => {
    const who = plain('w1', 'dropper');
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE scratch (x)' } });
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)' } });
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO customers (name) VALUES ('ada'), ('bo')" } });
    const drop = parked(await client.call({ ...who, tool: 'DATA_DROP_TABLE', arguments: { table: 'scratch' } }, { wait: false }));
    expect(drop.approval).toMatchObject({ object: { type: 'table', name: 'scratch', definition: 'CREATE TABLE scratch (x)', rows: 0 } });

    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'ALTER TABLE scratch RENAME TO old_scratch' } });
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'ALTER TABLE customers RENAME TO scratch' } });
    const done = client.result(drop.callId, { ...whoOf(drop), wait: true });
    await client.decide(drop.approval.id, { decision: 'approve', key: keyOf.w1! });
    // Superseded: the call waits on a new approval, about the table named scratch now.
    await expect
      .poll(() => client.result(drop.callId, whoOf(drop)))
      .toMatchObject({ status: 'awaiting_approval', approval: { supersedes: drop.approval.id, object: { name: 'scratch', rows: 2 } } });
    const again = (await client.result(drop.callId, whoOf(drop))) as { approval: { id: string } };
    await client.decide(again.approval.id, { decision: 'reject', key: keyOf.w1! });
    expect(await done).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
    expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT name FROM scratch ORDER BY id' } })).toMatchObject({
      ok: true,
      result: { rows: [['ada'], ['bo']] },
    });
  });

  it('a drop approval shows a long definition shortened and binds the whole of it by digest; Redis keeps little', async () => {
    const who = plain('w1', 'wide');
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE big (a)' } });
    for (let i = 0; i < 12; i++) {
      expect(
        await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: `ALTER TABLE big ADD COLUMN c${i} DEFAULT '${'x'.repeat(95_000)}'` } }),
      ).toMatchObject({ ok: true });
    }
    const drop = parked(await client.call({ ...who, callId: 'wide-drop', tool: 'DATA_DROP_TABLE', arguments: { table: 'big' } }, { wait: false }));
    const object = drop.approval.object as { definition: string };
    expect(Buffer.byteLength(object.definition)).toBeLessThanOrEqual(4096);
    expect(object.definition).toMatch(/…\[\d+ bytes in all\]$/);
    expect((await redis.call('MEMORY', 'USAGE', keysFor(sb.config.prefix).approval(drop.approval.id), 'SAMPLES', '0')) as number).toBeLessThan(64 * 1024);
    // Past the part shown, a changed default is still a changed definition.
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "ALTER TABLE big ADD COLUMN late DEFAULT 'z'" } });
    const done = client.result('wide-drop', { ...whoOf(drop), wait: true });
    await client.decide(drop.approval.id, { decision: 'approve', key: keyOf.w1! });
    await expect
      .poll(() => client.result('wide-drop', whoOf(drop)))
      .toMatchObject({ status: 'awaiting_approval', approval: { supersedes: drop.approval.id, effectNote: expect.stringContaining('definition changed') } });
    const again = (await client.result('wide-drop', whoOf(drop))) as { approval: { id: string } };
    await client.decide(again.approval.id, { decision: 'reject', key: keyOf.w1! });
    expect(await done).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
  });

  it('an approval lets its call run once: a resend after its result and record expired does not run it again', async () => {
    const who = { ...gated('w1', 'once'), callId: 'once-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE IF NOT EXISTS ran_once (x)' } };
    const first = parked(await client.call(who, { wait: false }));
    const done = client.result('once-1', { workspace: 'w1', agent: 'once', wait: true });
    await client.decide(first.approval.id, { decision: 'approve', key: keyOf.w1! });
    expect(await done).toMatchObject({ ok: true });
    // Eight days on: the job's result is gone (RESULT_TTL_HOURS) and the approval says when it ran.
    const store = new ApprovalStore(redis, keysFor(sb.config.prefix));
    await expect.poll(async () => (await store.get(first.approval.id))?.ran).toBeDefined();
    const ran = (await store.get(first.approval.id))!.ran!;
    await redis.hset(keysFor(sb.config.prefix).approval(first.approval.id), 'ran', JSON.stringify({ ...ran, at: ran.at - 8 * 24 * 3600 * 1000 }));
    const shard = shardOf(databaseId('w1', 'once'), sb.config.shardCount);
    const queue = new Queue(`{shard-${shard}}`, { connection: redis, prefix: sb.config.prefix });
    try {
      await queue.remove(callKey('w1', 'once', 'once-1'));
    } finally {
      await queue.close();
    }
    expect(await client.call(who)).toMatchObject({ ok: false, error: { code: 'APPROVAL_EXPIRED', message: expect.stringContaining('new call id') } });
  });

  it('a drop approved while the table is unchanged runs', async () => {
    const who = plain('w1', 'dropper2');
    await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE scratch (x)' } });
    const drop = parked(await client.call({ ...who, tool: 'DATA_DROP_TABLE', arguments: { table: 'SCRATCH' } }, { wait: false }));
    const done = client.result(drop.callId, { ...whoOf(drop), wait: true });
    await client.decide(drop.approval.id, { decision: 'approve', key: keyOf.w1! });
    expect(await done).toMatchObject({ ok: true, result: { dropped: 'scratch' } });
  });
});

describe('random interleavings of calls that share ids', () => {
  it("never let one workspace's approval, result or audit row reach another", async () => {
    const workspaces = ['p1', 'p2', 'p3'] as const;
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            ws: fc.constantFrom(...workspaces),
            agent: fc.constantFrom('a', 'b'),
            id: fc.constantFrom('x', 'y', 'z'),
            kind: fc.constantFrom('write', 'query'),
            decision: fc.constantFrom('approve', 'reject'),
          }),
          { minLength: 2, maxLength: 8 },
        ),
        async (calls) => {
          round++;
          // Each round its own ids, so rounds do not answer each other's (legitimately) replayed calls.
          const id = (c: (typeof calls)[number]) => `r${round}-${c.id}`;
          const answers = await Promise.all(
            calls.map((c) => {
              const sql = c.kind === 'write' ? `CREATE TABLE IF NOT EXISTS t_${c.ws}_${c.agent} (x)` : `SELECT '${c.ws}/${c.agent}'`;
              const settings = c.kind === 'write' ? gated(c.ws, c.agent).settings : plain(c.ws, c.agent).settings;
              return client.call(
                {
                  workspace: c.ws,
                  agent: c.agent,
                  settings,
                  callId: id(c),
                  tool: c.kind === 'write' ? 'DATA_WRITE_SQL' : 'DATA_QUERY_SQL',
                  arguments: { sql },
                },
                { wait: false },
              );
            }),
          );
          const decisions: Promise<unknown>[] = [];
          for (const [i, answer] of answers.entries()) {
            const c = calls[i]!;
            if (!answer.ok && 'status' in answer && answer.status === 'awaiting_approval') {
              expect(answer.approval).toMatchObject({ workspace: c.ws, agent: c.agent });
              // Another workspace's key never decides it.
              const stranger = workspaces.find((w) => w !== c.ws)!;
              expect(await client.decide(answer.approval.id, { decision: 'approve', key: keyOf[stranger]! })).toMatchObject({ ok: false });
              decisions.push(client.decide(answer.approval.id, { decision: c.decision, key: keyOf[c.ws]! }));
            } else if (answer.ok && c.kind === 'query') {
              // A query answers its own caller's rows, or (same id, same caller) the first call's.
              expect((answer as Envelope & { result: { rows: unknown[][] } }).result.rows).toEqual([[`${c.ws}/${c.agent}`]]);
            } else if (!answer.ok && 'error' in answer) {
              // The only refusal allowed: the caller reused its own id for another call.
              expect(answer.error.code).toBe('IDEMPOTENCY_CONFLICT');
            }
          }
          await Promise.all(decisions);
          for (const c of calls) {
            const end = await client.result(id(c), { workspace: c.ws, agent: c.agent, wait: true });
            if (end.ok && 'result' in end && Array.isArray(end.result.rows) && end.result.rows.length) {
              expect(end.result.rows).toEqual([[`${c.ws}/${c.agent}`]]);
            }
          }
        },
      ),
      { numRuns: 12 },
    );
    // Every audit row sits in the database of the caller it names, about that caller's statement.
    let rows = 0;
    for (const ws of workspaces) {
      for (const agent of ['a', 'b']) {
        for (const row of auditOf(ws, agent)) {
          rows++;
          expect(row.call_id.startsWith(`${ws}.${agent}.`)).toBe(true);
          expect(row.statement).toBe(`CREATE TABLE IF NOT EXISTS t_${ws}_${agent} (x)`);
        }
      }
    }
    expect(rows).toBeGreaterThan(0);
  });
});

async function pendingOf(workspace: string) {
  return new ApprovalStore(redis, keysFor(sb.config.prefix)).pages.list({ workspace, state: 'pending' });
}
