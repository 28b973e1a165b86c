import { createServer, type ServerResponse, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { limitConnections } from '../../src/http/connection-limits.ts';

// Session 38, T21: with the total held, a newcomer took the place of the oldest connection of the
// site holding the most, whatever it was doing: a connection mid-request was cut, and its client
// got a reset instead of its answer (a write that may have run). Now only a connection with no
// request under way is taken back, the longest idle first; with none idle the newcomer is refused.
// The loopback addresses 127.0.0.2-4 stand for three sites (each IPv4 address counts alone).

let server: Server | undefined;
const sockets: Socket[] = [];
/** Answers to requests for `/hold`, kept until the test gives them. */
const holding: ServerResponse[] = [];

afterEach(async () => {
  for (const r of holding.splice(0)) r.end('late');
  for (const s of sockets.splice(0)) s.destroy();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

async function listening(perAddress: number, total: number): Promise<number> {
  server = createServer((request, response) => {
    if (request.url === '/hold') holding.push(response);
    else response.end('ok');
  });
  limitConnections(server, { perAddress, total, requestTimeoutMs: 30_000, checkEveryMs: 5_000 }, false);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

interface Connection {
  socket: Socket;
  closed: Promise<void>;
  /** The next data on it, or 'closed'. */
  next: () => Promise<string>;
}

/** A connection from `from`, connected. */
async function open(port: number, from: string): Promise<Connection> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  sockets.push(socket);
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const next = () =>
    new Promise<string>((resolve) => {
      if (socket.destroyed) return resolve('closed');
      socket.once('data', (d) => resolve(d.toString()));
      socket.once('close', () => resolve('closed'));
    });
  return { socket, closed, next };
}

/** Asks `path` on `c` and waits for its answer (or its close). */
async function ask(c: Connection, path = '/'): Promise<string> {
  const got = c.next();
  c.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  return got;
}

/** Asks `/hold` on `c`: resolves once the server holds the request, with its answer to come (boxed: an async function's promise would wait for it). */
async function hold(c: Connection): Promise<{ answer: Promise<string> }> {
  const had = holding.length;
  const got = c.next();
  c.socket.write('GET /hold HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  while (holding.length === had) await new Promise((resolve) => setImmediate(resolve));
  return { answer: got };
}

it('takes back an idle connection of the site holding the most, not its older one mid-request', async () => {
  const port = await listening(3, 4);
  const hog = [await open(port, '127.0.0.2'), await open(port, '127.0.0.2'), await open(port, '127.0.0.2')];
  const held = await hold(hog[0]!);
  expect(await ask(hog[1]!)).toMatch(/ok$/);
  expect(await ask(hog[2]!)).toMatch(/ok$/);
  const other = await open(port, '127.0.0.3');
  expect(await ask(other)).toMatch(/ok$/);
  // The total is held: the newcomer takes the place of the hog's oldest idle connection.
  const newcomer = await open(port, '127.0.0.4');
  expect(await ask(newcomer)).toMatch(/ok$/);
  await hog[1]!.closed;
  // main: the oldest, mid-request, was cut ('closed' for its answer).
  holding[0]!.end('done');
  expect(await held.answer).toMatch(/done$/);
  expect(hog[0]!.socket.destroyed).toBe(false);
  expect(hog[2]!.socket.destroyed).toBe(false);
});

it('refuses the newcomer rather than cut a request when no connection of the sites ahead is idle', async () => {
  const port = await listening(3, 4);
  const hog = [await open(port, '127.0.0.2'), await open(port, '127.0.0.2'), await open(port, '127.0.0.2')];
  const held = [await hold(hog[0]!), await hold(hog[1]!), await hold(hog[2]!)];
  const other = await open(port, '127.0.0.3');
  expect(await ask(other)).toMatch(/ok$/);
  // main: answered, in place of the hog's oldest connection, mid-request.
  const newcomer = await open(port, '127.0.0.4');
  expect(await ask(newcomer)).toBe('closed');
  for (const r of holding.splice(0)) r.end('done');
  for (const got of held) expect(await got.answer).toMatch(/done$/);
  // Answered, the hog's connections are idle again: the next newcomer takes one.
  const later = await open(port, '127.0.0.4');
  expect(await ask(later)).toMatch(/ok$/);
  await hog[0]!.closed;
});
