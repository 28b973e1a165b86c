import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import { PrincipalCache } from '../../src/registry/principal-cache.ts';
import type { Principal } from '../../src/registry/principal.ts';
import { REDIS_URL } from '../helpers/harness.ts';

// Session 31, H6: a cache started on a subscriber still connecting subscribed twice: its first
// 'ready' (emitted by ioredis after the subscription start() sent) subscribed again, and that
// second answer, after start() had resolved, dropped what the cache had remembered meanwhile, the
// key /mcp lists tools for while Redis is away among it (mcp-redis-down connected its subscriber
// first to step around it).

const principal: Principal = { kind: 'member', workspace: 'acme', member: { name: 'bea', role: 'admin' } } as Principal;
const open: PrincipalCache[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.close();
});

it('remembers a key put right after start() on a subscriber that was still connecting', async () => {
  const subscriber = new Redis(REDIS_URL);
  expect(subscriber.status).not.toBe('ready');
  // Any subscription after the first answers only once `release` is called: as on a loaded
  // machine, where its answer came after start() had resolved and the key had been put.
  const subscribe = subscriber.subscribe.bind(subscriber) as (channel: string) => Promise<unknown>;
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let subscriptions = 0;
  subscriber.subscribe = ((channel: string) =>
    ++subscriptions === 1 ? subscribe(channel) : subscribe(channel).then(async (n) => (await held, n))) as typeof subscriber.subscribe;
  const cache = new PrincipalCache(subscriber, `pcs-${randomUUID()}`, 60_000);
  open.push(cache);
  await cache.start();
  let dropped = false;
  void cache.changed().then(() => {
    dropped = true;
  });
  cache.put('key-1', principal, cache.mark());
  release();
  // Two round trips on the subscriber: any subscription's answer, and what follows it, is in.
  await subscriber.ping();
  await subscriber.ping();
  expect(subscriptions).toBe(1);
  expect(dropped).toBe(false);
  expect(cache.get('key-1')).toEqual(principal);
});

it('still subscribes again after a real reconnect, and forgets what it held across it', async () => {
  const subscriber = new Redis(REDIS_URL);
  const channel = `pcs-${randomUUID()}`;
  const cache = new PrincipalCache(subscriber, channel, 60_000);
  open.push(cache);
  await cache.start();
  cache.put('key-1', principal, cache.mark());
  expect(cache.get('key-1')).toEqual(principal);
  const back = new Promise((resolve) => subscriber.once('ready', resolve));
  subscriber.disconnect(true);
  await back;
  expect(cache.get('key-1')).toBeUndefined();
  // Live again once its subscription is answered (a round trip after the 'ready'), and hears changes.
  await subscriber.ping();
  cache.put('key-2', principal, cache.mark());
  expect(cache.get('key-2')).toEqual(principal);
  const publisher = new Redis(REDIS_URL);
  try {
    const heard = cache.changed();
    await publisher.publish(channel, 'x');
    await heard;
    expect(cache.get('key-2')).toBeUndefined();
  } finally {
    publisher.disconnect();
  }
});
