import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { limitConnections } from '../../src/http/connection-limits.ts';

// Session 38, T20: the total (HTTP_MAX_CONNECTIONS) closed every connection past it at the door,
// whoever opened it, so sites at their own bound could hold every place: 8 IPv6 /48s (1,024 each)
// took all 8,192, and every other client, of any tenant, was turned away for as long as they held
// them. With the total held, a newcomer now takes the place of the oldest connection of the site
// (an IPv4 address: itself) holding the most, when that one holds at least two more. The loopback
// addresses 127.0.0.2-4 stand for three sites here (each IPv4 address counts alone).

let server: Server | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server answering `ok` on every request, with the bounds of `limits`; its port. */
async function listening(perAddress: number, total: number): Promise<number> {
  server = createServer((_request, response) => response.end('ok'));
  limitConnections(server, { perAddress, total, requestTimeoutMs: 30_000, checkEveryMs: 5_000 }, false);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

/** A connection from `from` asking for `/`: whether the server answered on it or closed it, and the socket. */
async function ask(port: number, from: string): Promise<{ socket: Socket; got: 'answered' | 'closed'; closed: Promise<void> }> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  sockets.push(socket);
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const got = await new Promise<'answered' | 'closed'>((resolve) => {
    socket.once('connect', () => socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
    socket.once('data', () => resolve('answered'));
    socket.once('close', () => resolve('closed'));
  });
  return { socket, got, closed };
}

it('gives a newcomer the place of the oldest connection of the site holding the most when every place is held', async () => {
  const port = await listening(2, 4);
  // Two sites hold every place, two each.
  const first = [await ask(port, '127.0.0.2'), await ask(port, '127.0.0.2'), await ask(port, '127.0.0.3'), await ask(port, '127.0.0.3')];
  expect(first.map((c) => c.got)).toEqual(['answered', 'answered', 'answered', 'answered']);
  // main: closed at the door (the total held).
  const newcomer = await ask(port, '127.0.0.4');
  expect(newcomer.got).toBe('answered');
  // The place came from the oldest connection of a site holding two more.
  await first[0]!.closed;
  expect(first[0]!.socket.destroyed).toBe(true);
  // Its second is refused: no site holds two more than its one.
  expect((await ask(port, '127.0.0.4')).got).toBe('closed');
  // The others are still served on their connections.
  for (const c of first.slice(1)) {
    const again = new Promise<string>((resolve) => c.socket.once('data', (d) => resolve(d.toString())));
    c.socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect(await again).toMatch(/ok$/);
  }
});

it('still closes a connection past the total when no site holds two more than the newcomer', async () => {
  const port = await listening(2, 3);
  const held = [await ask(port, '127.0.0.2'), await ask(port, '127.0.0.3'), await ask(port, '127.0.0.4')];
  expect(held.map((c) => c.got)).toEqual(['answered', 'answered', 'answered']);
  expect((await ask(port, '127.0.0.5')).got).toBe('closed');
  expect((await ask(port, '127.0.0.2')).got).toBe('closed');
  // Nothing was taken back for them.
  for (const c of held) expect(c.socket.destroyed).toBe(false);
});
