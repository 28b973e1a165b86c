import { MemberRegistry } from '../src/registry/members.ts';
import { connectRedis } from '../src/redis/connection.ts';
import type { AgentDbClient, AwaitingAnswer } from '../src/calls/client.ts';
import { keysFor } from '../src/redis/keys.ts';
import { drive, summarise, type RunStats } from './stats.ts';

const gated = { workspace: 'bench', settings: { database: 'agent' as const, approval: 'write' as const } };

/**
 * Approval figures: how long from a person's decision until the caller waiting on the call
 * sees its result, and whether thousands of parked calls slow other calls down.
 */
export async function benchApprovals(
  client: AgentDbClient,
  redisUrl: string,
  prefix: string,
  opts: { decisions: number; parked: number; queryCalls: number; query: (i: number) => Promise<void> },
) {
  const redis = connectRedis(redisUrl);
  const { key } = await new MemberRegistry(redis, keysFor(prefix)).add('bench', 'approver', 'member');
  redis.disconnect();
  const must = (ok: boolean, what: unknown) => {
    if (!ok) throw new Error(`bench approval step failed: ${JSON.stringify(what)}`);
  };
  const made = await client.call({
    ...gated,
    settings: { database: 'agent' },
    agent: 'approved',
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'CREATE TABLE a (i INTEGER)' },
  });
  must(made.ok, made);

  // Decision → result, one at a time: park, start waiting, decide, time until the result lands.
  const decisionLatencies: number[] = [];
  for (let i = 0; i < opts.decisions; i++) {
    const parked = (await client.call(
      { ...gated, agent: 'approved', tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO a VALUES (?)', params: [i] } },
      { wait: false },
    )) as AwaitingAnswer;
    must(parked.status === 'awaiting_approval', parked);
    const waiting = client.result(parked.callId, { workspace: 'bench', agent: 'approved', wait: true });
    const t = performance.now();
    const decided = await client.decide(parked.approval.id, { decision: 'approve', key });
    must(decided.ok, decided);
    const end = await waiting;
    decisionLatencies.push(performance.now() - t);
    must(end.ok, end);
  }
  const decisionToResult = summarise(decisionLatencies, decisionLatencies.reduce((a, b) => a + b, 0) / 1000);

  // Other calls with and without many parked calls around them.
  const without = await drive(opts.queryCalls, 1, opts.query);
  const parkStart = performance.now();
  await drive(opts.parked, 64, async (i) => {
    const p = await client.call({ ...gated, agent: `parked-${i % 100}`, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE p (x)' } }, { wait: false });
    must(!p.ok && 'status' in p && p.status === 'awaiting_approval', p);
  });
  const parkSeconds = (performance.now() - parkStart) / 1000;
  const withParked = await drive(opts.queryCalls, 1, opts.query);
  const queryWithout: RunStats = summarise(without.latencies, without.seconds);
  const queryWithParked: RunStats = summarise(withParked.latencies, withParked.seconds);
  return {
    decisionToResult,
    parked: { calls: opts.parked, parkPerSec: Math.round(opts.parked / parkSeconds) },
    queryWithout,
    queryWithParked,
  };
}
