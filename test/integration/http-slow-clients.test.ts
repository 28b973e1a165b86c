import type { FastifyInstance } from 'fastify';
import { connect, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { buildApp } from '../../src/http/app.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// The hostile review held 3,000 connections open with no key, each having sent a POST's headers
// and then a byte of body every 5 s: none was closed, and each was a file descriptor of the
// process that runs the workers too. A request must now arrive whole within its timeout, and one
// address holds at most so many connections.
let sb: Sandbox;
let redis: Redis;
let approvals: ApprovalService;
let app: FastifyInstance;
let port: number;
const sockets: Socket[] = [];
const PER_ADDRESS = 4;

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  const members = new MemberRegistry(redis, keysFor(sb.config.prefix));
  approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
  app = buildApp({
    redis,
    shardCount: sb.config.shardCount,
    members,
    approvals,
    connections: { requestTimeoutMs: 300, checkEveryMs: 100, perAddress: PER_ADDRESS },
  });
  // A route that reads its body before answering, as /mcp and the forms do.
  app.post('/read-body', async (request) => ({ got: request.body }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as { port: number }).port;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await app.close();
  await approvals.close();
  redis.disconnect();
  await sb.cleanup();
});

/** A connection to the app, once it is open. */
function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    sockets.push(s);
    s.once('error', reject);
  });
}

/** What the server sent on `s` until it closed it. */
function untilClosed(s: Socket): Promise<string> {
  let got = '';
  s.on('data', (d) => {
    got += d.toString();
  });
  return new Promise((resolve) => s.once('close', () => resolve(got)));
}

describe('slow and piled-up connections', () => {
  /** What the server answers `path` while its body arrives a byte at a time, as a slowloris sends it, until it closes. */
  async function drip(path: string): Promise<string> {
    const s = await open();
    const closed = untilClosed(s);
    s.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`);
    const more = setInterval(() => s.writable && s.write(' '), 50);
    const answer = await closed;
    clearInterval(more);
    return answer;
  }

  it('answers 408 and closes a request whose body never finishes arriving', async () => {
    expect(await drip('/read-body')).toMatch(/^HTTP\/1\.1 408/);
  });

  it('closes the connection of a request answered before its body arrived (the 401 of the key check), by the body deadline', async () => {
    // Within the route's limit the connection is kept for its body to end (T17), so the 401 says
    // keep-alive; the body dripping past the deadline, the connection is closed all the same.
    const answer = await drip('/v1/approvals/decide');
    expect(answer).toMatch(/^HTTP\/1\.1 401/);
    expect(answer).not.toMatch(/408/);
  });

  it('closes at once the connection of a request answered before a body announced past its limit', async () => {
    const s = await open();
    const closed = untilClosed(s);
    s.write('POST /v1/approvals/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{');
    expect(await closed).toMatch(/^HTTP\/1\.1 401[\s\S]*connection: close/i);
  });

  it('closes connections of one address past its bound, and takes new ones once some close', async () => {
    const held = await Promise.all(Array.from({ length: PER_ADDRESS }, open));
    const extra = await open();
    expect(await untilClosed(extra)).toBe('');
    for (const s of held) {
      const closed = new Promise((r) => s.once('close', r));
      s.destroy();
      await closed;
    }
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    expect(res.status).toBe(200);
  });
});
