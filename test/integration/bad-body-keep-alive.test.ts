import http from 'node:http';
import { expect, it } from 'vitest';
import { withListeningAgent } from '../helpers/keyed-app.ts';

// Hostile review T18 (session 37): Fastify closes the connection after every body it cannot parse
// (the body may be left unread), so a client sending JSON cut short opened a connection a request
// (T17 measured 3,050 sockets for 3,000 such 400s, the dearest refusal left). A body that arrived
// whole leaves nothing to read: its 400 keeps the connection. One announced past the limit, whose
// body is not read, still closes.

let port: number;
let key: string;

withListeningAgent('badbody', (box) => {
  ({ port, key } = box);
});

/** Posts `body` as JSON on `agent`; the status, the connection header and the socket it came on. */
function post(
  agent: http.Agent,
  body: string,
  length = Buffer.byteLength(body),
): Promise<{ status: number; connection: string; socket: unknown; code?: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/calls',
        agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': length },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, connection: String(res.headers.connection), socket: res.socket, code: JSON.parse(text).error?.code }),
        );
      },
    );
    req.on('error', reject);
    req.end(length === Buffer.byteLength(body) ? body : undefined);
  });
}

it('keeps the connection of a body that arrived whole but is not JSON: a flood of bad bodies is not a connection each', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const bodies = ['{"tool":"DATA_QUERY_SQL","argu', `{"tool": ${'x'.repeat(20_000)}`, '{', 'not json at all'];
    const answers = [];
    for (const body of bodies) answers.push(await post(agent, body));
    expect(answers.map((a) => [a.status, a.code])).toEqual(bodies.map(() => [400, 'INVALID_ARGUMENTS']));
    // main: 'close' each, and four sockets. (No header at all now: HTTP/1.1 keeps a connection by default.)
    expect(answers.filter((a) => a.connection === 'close')).toEqual([]);
    expect(new Set(answers.map((a) => a.socket)).size).toBe(1);
    // The connection still serves a good call after them.
    const good = await post(agent, JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1 AS one' } }));
    expect(good.status).toBe(200);
    expect(good.socket).toBe(answers[0]!.socket);
  } finally {
    agent.destroy();
  }
});

it('still closes the connection of a body announced past the limit, which is not read', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const answer = await post(agent, '', 100 * 1024 * 1024);
    expect(answer.status).toBe(413);
    expect(answer.connection).toBe('close');
  } finally {
    agent.destroy();
  }
});
