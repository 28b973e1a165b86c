import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { OAuthClients } from '../../src/oauth/oauth-clients.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL } from '../helpers/harness.ts';

// A client ID metadata document is read for a token or revocation request, which needs no sign-in,
// and was kept an hour (up to 4 KB) with only a per-address bound: many addresses, each naming URLs
// of their own, filled Redis with no service-wide cap (session 33, T11). Kept documents now take
// places among the apps nobody has signed in through (OAUTH_UNCONSENTED_CLIENTS_MAX), as
// registrations do; past it a document still answers, and is not kept.

const prefix = `t-${randomUUID().slice(0, 12)}`;
const keys = keysFor(prefix);
let redis: Redis;
let reads = 0;

beforeAll(() => {
  redis = new Redis(REDIS_URL);
});
afterAll(async () => {
  const left = await redis.keys(`${prefix}:*`);
  if (left.length) await redis.del(...left);
  redis.disconnect();
});

const fetchDocument = async (url: string) => {
  reads++;
  return { client_id: url, client_name: 'Desk', redirect_uris: ['https://desk.example/cb'], token_endpoint_auth_method: 'none' };
};

it('keeps at most the cap of documents and registrations nobody signed in through; past it a document answers but is not kept', async () => {
  const clients = new OAuthClients(redis, keys, fetchDocument, 3);
  // Five addresses, each naming a document of its own.
  for (let i = 0; i < 5; i++) {
    const url = `https://desk${i}.example/client.json`;
    expect(await clients.get(url, `198.51.100.${i + 1}`)).toMatchObject({ clientId: url, clientName: 'Desk' });
  }
  expect(reads).toBe(5);
  expect(await redis.keys(keys.oauth('client', 'doc:*'))).toHaveLength(3);
  // Kept ones answer from the cache; one not kept is read again.
  await clients.get('https://desk0.example/client.json', '198.51.100.1');
  expect(reads).toBe(5);
  await clients.get('https://desk4.example/client.json', '198.51.100.5');
  expect(reads).toBe(6);
  // The places are the registrations' too: none is left for a new one.
  await expect(clients.register({ redirect_uris: ['https://desk.example/cb'], client_name: 'New' }, '203.0.113.9')).rejects.toMatchObject({
    errorCode: 'too_many_requests',
  });
});
