import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T2 (session 26): `agents remove` says the agent's keys no longer work, and they
// did not, until an agent was registered again under the same name: every key of the removed
// agent (one that leaked, say) then worked again, for the new agent, and a call parked with one
// ran when a person released it. Seen live against `agentdb start`: 200, 401, then 200 again.

let sb: Sandbox;
let k: KeyedApp;
let base: string;
let redis: Redis;
let agents: AgentRegistry;
let ring: AgentKeyRing;
const PROFILE = { displayName: 'Scout', settings: { database: 'agent' as const } };

beforeAll(async () => {
  sb = sandbox();
  k = keyedApp(sb);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  redis = new Redis(REDIS_URL);
  agents = new AgentRegistry(redis, keysFor(sb.config.prefix));
  ring = new AgentKeyRing(redis, keysFor(sb.config.prefix), agents);
});
afterAll(async () => {
  redis.disconnect();
  await k.close();
  await sb.cleanup();
});

/** The status of a call lookup with `key`: 401 for a key that is no one's, 404 (no such call) for one that works. */
async function status(key: string): Promise<number> {
  return (await fetch(`${base}/v1/calls/none-such`, { headers: { authorization: `Bearer ${key}` } })).status;
}

/** Removes `slug` then registers it again, each heard by the server's principal cache. */
async function removeAndAddAgain(slug: string): Promise<void> {
  let heard = k.principals.changed();
  expect(await agents.remove('acme', slug)).toBe(true);
  await heard;
  heard = k.principals.changed();
  await agents.put('acme', slug, PROFILE);
  await heard;
}

it("a removed agent's keys stay dead when its name is registered again", async () => {
  const old = await k.agentKey('acme', 'scout', PROFILE);
  const [oldInfo] = await ring.list('acme', 'scout');
  expect(await status(old)).toBe(404);
  await removeAndAddAgain('scout');
  expect(await status(old)).toBe(401);
  // Nor does a call parked with it run when released.
  expect((await ring.standing('acme', oldInfo!.id, 'scout')).ok).toBe(false);
  // The new agent's own keys work.
  const fresh = await ring.mint('acme', 'scout');
  expect(await status(fresh.key)).toBe(404);
  expect((await ring.standing('acme', fresh.info.id, 'scout')).ok).toBe(true);
});

it('a key minted before keys named their agent is told by its date', async () => {
  const old = await k.agentKey('acme', 'legacy', PROFILE);
  const [oldInfo] = await ring.list('acme', 'legacy');
  /** Strips `agentSince` from key `id`, as records minted before it was kept are. */
  const asBefore = async (id: string) => {
    const hash = keysFor(sb.config.prefix).agentKeys('acme');
    const record = JSON.parse((await redis.hget(hash, id))!) as Record<string, unknown>;
    delete record.agentSince;
    await redis.hset(hash, id, JSON.stringify(record));
  };
  await asBefore(oldInfo!.id);
  expect(await status(old)).toBe(404);
  await removeAndAddAgain('legacy');
  expect(await status(old)).toBe(401);
  const fresh = await ring.mint('acme', 'legacy');
  await asBefore(fresh.info.id);
  expect(await status(fresh.key)).toBe(404);
});
