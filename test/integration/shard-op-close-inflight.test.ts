import { randomUUID } from 'node:crypto';
import { type AddressInfo, createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL } from '../helpers/harness.ts';

// Review 19 (NU): `agentdb history acme/scout` printed its answer, then died about one run in
// fifteen with an unhandled "Connection is closed." from ioredis (exit 1). BullMQ's
// waitUntilFinished sends its own look at the job (the isFinished script) on the ops connection;
// when the op's completed event answered first, the CLI closed, and close() dropped that
// connection with disconnect(), rejecting the script's reply inside BullMQ, where nobody listens.
// Here the client reaches Redis through a proxy that delays every byte by LATENCY_MS while the
// worker answers at once, so the event always beats the script's reply: the race every time.
const LATENCY_MS = 40;
const prefix = `t-opclose-${randomUUID()}`;
const keys = keysFor(prefix);
const redis = new Redis(REDIS_URL);
const target = new URL(REDIS_URL);
let proxy: Server;
let proxyUrl: string;
const sockets = new Set<Socket>();

/** Forwards `from` to `to`, each chunk LATENCY_MS later (in order: every chunk waits as long). */
function slowPipe(from: Socket, to: Socket): void {
  from.on('data', (chunk) => setTimeout(() => to.writable && to.write(chunk), LATENCY_MS));
  from.on('close', () => setTimeout(() => to.destroy(), LATENCY_MS));
  from.on('error', () => undefined);
}

beforeAll(async () => {
  proxy = createServer((client) => {
    const upstream = netConnect(Number(target.port || 6379), target.hostname);
    sockets.add(client).add(upstream);
    slowPipe(client, upstream);
    slowPipe(upstream, client);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `redis://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => proxy.close(r));
  const doomed = await redis.keys(`${prefix}:*`);
  if (doomed.length > 0) await redis.del(...doomed);
  redis.disconnect();
});

it('closes after an op answered by its event without leaving a rejection nobody hears', async () => {
  const unheard: unknown[] = [];
  const onUnhandled = (reason: unknown) => unheard.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const workerConn = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const worker = new Worker(keys.queueName(5), async () => ({ ok: true, result: { fine: true } }), { connection: workerConn, prefix: keys.bullPrefix });
  try {
    await worker.waitUntilReady();
    for (let i = 0; i < 5; i++) {
      const ops = new ShardOpClient({ redisUrl: proxyUrl, prefix });
      expect(await ops.run(5, 'noop', {}, { timeoutMs: 10_000 })).toMatchObject({ ok: true });
      await ops.close();
      // Long enough for the script's reply (or its rejection) to come back through the proxy.
      await new Promise((r) => setTimeout(r, 4 * LATENCY_MS));
    }
    expect(unheard.map(String)).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    await worker.close();
    workerConn.disconnect();
  }
}, 60_000);

// CI on 0c7e6ee: two unhandled 'Connection is closed.' while web-export-bounds stopped its web
// server with CSV exports under way. An op whose add was still on its way back when the client
// closed went on into BullMQ's waitUntilFinished, whose look at the job then met the closed
// connection inside BullMQ, where nobody hears it. Here the add's reply is 40 ms away through the
// proxy when close() begins; no worker takes the op, so only the close ends its wait, at once
// (before, the op waited out its whole timeout: a closed queue tells no waiter).
it('closes with an op whose add is still on its way back, leaving no rejection nobody hears', async () => {
  const unheard: unknown[] = [];
  const onUnhandled = (reason: unknown) => unheard.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    for (let i = 0; i < 5; i++) {
      const ops = new ShardOpClient({ redisUrl: proxyUrl, prefix });
      // Ready first, so the op's add is the next thing the proxy carries.
      await ops.run(6, 'warm-up', {}, { timeoutMs: 1 }).catch(() => undefined);
      const before = await redis.llen(`${keys.bullPrefix}:${keys.queueName(6)}:wait`);
      const answer = ops.run(6, 'noop', {}, { timeoutMs: 600_000 }).then(
        () => 'answered',
        () => 'refused',
      );
      // The add has reached Redis; its reply is still in the proxy.
      for (;;) {
        const waiting = await redis.llen(`${keys.bullPrefix}:${keys.queueName(6)}:wait`);
        if (waiting > before) break;
        await new Promise((r) => setImmediate(r));
      }
      await ops.close();
      // Answered by the close: its timeout is past the test's.
      expect(await answer).toBe('refused');
      await new Promise((r) => setTimeout(r, 4 * LATENCY_MS));
    }
    expect(unheard.map(String)).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
}, 60_000);
