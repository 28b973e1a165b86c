import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli } from '../helpers/processes.ts';

// A member's call looked up by the name alone (`agentdb result --agent @ada`, a runtime's client):
// the CLI looked the active member up on a second connection of its own, the client not at all,
// so the client found none of a member's calls (keyed by their record since session 26) by name.
// No worker runs: the call stays queued (its pick-up wait cut short), which is where it stands.

let sb: Sandbox;
let redis: Redis;
let client: AgentDbClient;
let members: MemberRegistry;

beforeAll(() => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  client = sb.client();
  members = new MemberRegistry(redis, keysFor(sb.config.prefix));
});
afterAll(async () => {
  await client.close();
  redis.disconnect();
  await sb.cleanup();
});

it("finds the active member's calls by @name, and not an earlier member's of the name", async () => {
  const { member } = await members.add('acme', 'ada', 'admin');
  const sent = await client.call(
    {
      workspace: 'acme',
      agent: '@ada',
      member: { name: 'ada', role: 'admin', since: member.createdAt },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT 1' },
      callId: 'c1',
    },
    { wait: false, timeoutMs: 100 },
  );
  expect(sent).toMatchObject({ ok: false, status: 'queued' });
  expect(await client.result('c1', { workspace: 'acme', agent: '@ada' })).toMatchObject({ callId: 'c1', status: 'queued' });
  const cli = await runCli(['result', 'c1', '--workspace', 'acme', '--agent', '@ada'], sb.env);
  expect(cli.code, cli.stderr).toBe(0);
  expect(JSON.parse(cli.stdout)).toMatchObject({ callId: 'c1', status: 'queued' });

  // Revoked and added again: another person, who does not read the first one's call.
  expect(await members.revoke('acme', 'ada')).toBe(true);
  await members.add('acme', 'ada', 'member');
  expect(await client.result('c1', { workspace: 'acme', agent: '@ada' })).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
});
