import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { accessEnded, cacheKey } from '../../src/oauth/access-token-cache.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { Principal } from '../../src/registry/principal.ts';
import { PrincipalCache } from '../../src/registry/principal-cache.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 38, T20: an ended access token (a refresh, a revoke) forgot its cache entries but left
// their keys in the cache's index by workspace, so a member whose app refreshed its token in a loop
// grew that index by a key a refresh, in every HTTP process, for as long as their workspace did not
// change; and each such forget walked every cached entry of every tenant (~0.3 ms at 10,000).

let sb: Sandbox;
let publisher: Redis;
let cache: PrincipalCache;
let channel: string;

beforeAll(async () => {
  sb = sandbox();
  publisher = new Redis(REDIS_URL);
  channel = keysFor(sb.config.prefix).registryChanges;
  cache = new PrincipalCache(new Redis(REDIS_URL), channel, 60_000);
  await cache.start();
});
afterAll(async () => {
  cache.close();
  await publisher.quit();
  await sb.cleanup();
});

const member = (workspace: string): Principal => ({ kind: 'member', workspace, member: { name: 'ada' } as never });
const RESOURCE = 'https://agentdb.example/mcp';

/** Publishes `message` on the registry channel and waits until the cache has heard it. */
async function heard(message: string): Promise<void> {
  const changed = cache.changed();
  await publisher.publish(channel, message);
  await changed;
}

it('an access token ended in a loop leaves nothing of its keys in the cache', async () => {
  cache.put('agent-key-of-other', member('other'), cache.mark());
  for (let i = 0; i < 300; i++) {
    const hash = `h${i}`;
    cache.put(cacheKey(hash, RESOURCE), member('acme'), cache.mark());
    expect(cache.get(cacheKey(hash, RESOURCE))).toBeDefined();
    await heard(accessEnded(hash));
    expect(cache.get(cacheKey(hash, RESOURCE))).toBeUndefined();
  }
  // main: { byWorkspace: 301, … } (every ended token's key still indexed under acme).
  expect(cache.indexed()).toEqual({ byWorkspace: 1, byStem: 0 });
  expect(cache.get('agent-key-of-other')).toBeDefined();
});

it('a lookup begun before its token ended does not put it; one of another token does', async () => {
  const mark = cache.mark();
  await heard(accessEnded('gone'));
  cache.put(cacheKey('gone', RESOURCE), member('acme'), mark);
  cache.put(cacheKey('kept', RESOURCE), member('acme'), mark);
  expect(cache.get(cacheKey('gone', RESOURCE))).toBeUndefined();
  expect(cache.get(cacheKey('kept', RESOURCE))).toBeDefined();
});
