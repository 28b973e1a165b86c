import { describe, expect, it } from 'vitest';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import type { AgentDbClient, CallAnswer } from '../../src/calls/client.ts';
import { errorEnvelope } from '../../src/contracts/envelope.ts';
import type { Principal } from '../../src/registry/principal.ts';

// Review K1 (session 27): Redis SIGKILLed and started again empty under members' writes over
// /mcp. A write the request had just handed to Redis (answered "queued" by its enqueue) was looked
// up for its wait after Redis had lost its job, and answered NOT_FOUND ("There is no call …"),
// a refusal that says nothing ran, for a write that had committed. A client believing it sends
// nothing again; one sending it again got its committed outcome.

const member: Principal = { kind: 'member', workspace: 'acme', member: { name: 'ada', role: 'admin' }, since: 1 };
const write = { tool: 'DATA_WRITE_SQL', callId: 'ada-1', arguments: { sql: 'INSERT INTO t (v) VALUES (1)' } };

/** A client whose Redis lost the call's job between its enqueue and the request's wait for it. */
function clientLosingTheJob(): AgentDbClient {
  const lost = errorEnvelope('ada-1', '', 'NOT_FOUND', 'There is no call "ada-1" of acme/@ada (or its result has expired).');
  return {
    call: async () => ({ ok: false, callId: 'ada-1', tool: 'DATA_WRITE_SQL', status: 'queued' }) as CallAnswer,
    result: async () => lost as CallAnswer,
  } as unknown as AgentDbClient;
}

describe('a keyed call whose job Redis lost after the request enqueued it', () => {
  it.each([
    ['waiting for it', 5_000],
    ['its wait already over', 0],
  ])('answers that it may have run (%s), never that there is no such call', async (_, maxWaitMs) => {
    const answer = await new KeyedCalls(clientLosingTheJob()).call(member, write, { wait: true, maxWaitMs });
    expect(answer).toMatchObject({ ok: false, callId: 'ada-1', error: { code: 'UNAVAILABLE' }, mayStillRun: true });
  });
});
