import { expect, it } from 'vitest';
import { callKey, callKeyOf, unboundKeyOf } from '../../src/contracts/call-identity.ts';
import { completedCaller, completedEvent } from '../../src/redis/events.ts';

// A member's calls are keyed by their member record's creation (hostile review T2): the key, and
// the events that name a call, carry it; where only the key travels, the key before it is found.

it("keys a member's call by the member record, and an agent's as before", () => {
  expect(callKey('acme', '@bob', 'q1', 1765000000000)).toBe('acme.@bob~1765000000000.q1');
  expect(callKeyOf({ workspace: 'acme', agent: '@bob', callId: 'q1', member: { name: 'bob', role: 'member', since: 7 } })).toBe('acme.@bob~7.q1');
  expect(callKeyOf({ workspace: 'acme', agent: '@bob', callId: 'q1', member: { name: 'bob', role: 'member' } })).toBe('acme.@bob.q1');
  expect(callKeyOf({ workspace: 'acme', agent: 'scout', callId: 'q1' })).toBe('acme.scout.q1');
});

it("keys an agent key's call by its agent's registration (session 28, L1), a runtime's by the name", () => {
  expect(callKeyOf({ workspace: 'acme', agent: 'scout', callId: 'q1', agentSince: 1765000000000 })).toBe('acme.scout~1765000000000.q1');
  expect(unboundKeyOf('acme.scout~1765000000000.q1')).toEqual({ key: 'acme.scout.q1', since: 1765000000000 });
  const env = { ok: true as const, callId: 'q1', tool: 'DATA_QUERY_SQL', credits: 1, result: {} };
  const { json } = completedEvent(env as never, 'acme', 'scout', 1765000000000);
  const caller = completedCaller(['type', 'call.completed', 'data', json])!;
  expect(callKey(caller.workspace, caller.agent, caller.callId, caller.memberSince)).toBe('acme.scout~1765000000000.q1');
});

it('finds the unbound key of a bound one only', () => {
  expect(unboundKeyOf('acme.@bob~1765000000000.q1')).toEqual({ key: 'acme.@bob.q1', since: 1765000000000 });
  expect(unboundKeyOf('acme.@bob.q1')).toBeUndefined();
  expect(unboundKeyOf('acme.scout.q1')).toBeUndefined();
  expect(unboundKeyOf('acme.scout.q1~2')).toBeUndefined();
});

it("reads a member's call off a completion event's head, as it names the call", () => {
  const env = { ok: true as const, callId: 'q1', tool: 'DATA_QUERY_SQL', credits: 1, result: {} };
  for (const since of [undefined, 1765000000000]) {
    const { json } = completedEvent(env as never, 'acme', '@bob', since);
    const caller = completedCaller(['type', 'call.completed', 'data', json])!;
    expect(callKey(caller.workspace, caller.agent, caller.callId, caller.memberSince)).toBe(callKey('acme', '@bob', 'q1', since));
    expect(JSON.parse(json)).toMatchObject({ agent: '@bob', ...(since ? { memberSince: since } : {}) });
  }
});
