import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { rateSource, rateSource48, SITE_TIMES_ADDRESS } from '../oauth/oauth-rate-source.ts';
import { ConcurrentSlots, type IdleSlot } from '../policy/concurrent-slots.ts';

/**
 * How long a request may take to arrive whole, headers and body. Fastify's default is none: in
 * the hostile review 3,000 connections that sent a POST's headers and then one byte of body
 * every 5 s were all still open after a minute, with no key, each a file descriptor of the
 * process that also runs the shard workers, their Redis connections and the blob store. The
 * largest body agentdb takes (a call, MAX_CALL_BYTES) arrives in well under this on any link
 * a person or agent uses. It bounds receiving the request only: a long poll, an SSE stream or
 * an MCP call waiting for a decision has long been received and is not cut. The default of
 * HTTP_REQUEST_TIMEOUT_MS (src/config.ts), which `agentdb start` passes in.
 */
export const REQUEST_TIMEOUT_MS = 30_000;

/** How often Node looks for requests past {@link REQUEST_TIMEOUT_MS} (its default is 30 s). */
const CHECK_EVERY_MS = 5_000;

/**
 * Connections one address (an IPv6 address's /64) may hold open at once (an IPv6 /48, SITE_TIMES_ADDRESS times as many: 1,024). A person's browser keeps a handful (the page,
 * its event stream), an MCP client or agent a few, a runtime's long polls one per call waited on;
 * an address past this is someone holding sockets, not using them. Behind a proxy (TRUST_PROXY)
 * every connection comes from the proxy, which bounds its own clients: only the total applies.
 * The default of HTTP_CONNECTIONS_PER_ADDRESS: a large office behind one NAT may need more.
 */
export const MAX_CONNECTIONS_PER_ADDRESS = 256;

/**
 * Connections the server holds at once, whoever opens them: well under the process's file
 * descriptors (Node raises its soft limit to the hard one; 1,024 is a common hard limit only on
 * old systems), so that a flood of connections from many addresses is turned away at the door
 * and SQLite files, Redis connections and the blob store keep theirs. The default of HTTP_MAX_CONNECTIONS.
 */
export const MAX_CONNECTIONS = 8_192;

export interface ConnectionLimits {
  requestTimeoutMs: number;
  perAddress: number;
  total: number;
  /** How often Node checks {@link requestTimeoutMs}; tests lower it. */
  checkEveryMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  perAddress: MAX_CONNECTIONS_PER_ADDRESS,
  total: MAX_CONNECTIONS,
  checkEveryMs: CHECK_EVERY_MS,
};

/**
 * Ends the connection of a request whose body has not arrived whole within `ms` of its headers,
 * looked at every `checkEveryMs` (so within `ms + checkEveryMs`, as Node checks its own
 * `requestTimeout`). Node's own `requestTimeout` does not: once Fastify has taken the request, a
 * body dripping a byte at a time kept its connection open past it for as long as the sender liked.
 * The deadline ends when the body has arrived whole, the request is answered, or its connection
 * is gone. An answer sent before its request's body has arrived (a 401 from the key check, a 404)
 * keeps its connection only for a body announced within the route's limit, still under this
 * deadline: Node reads the rest of the body after the answer, as slowly as the sender likes, past
 * the request timeout (which ends once the answer is sent); any other such answer closes it.
 *
 * One sweep rather than a timer per request: Fastify hands every request over before its body is
 * parsed (`complete` is false at `onRequest` even for a GET), so a timer per request was made and
 * cleared on every request of every route, with two more hook phases to clear it (`preValidation`,
 * `onResponse`): ~2.5 µs of CPU a request on a bare Fastify route of ~35 µs (docs/benchmarks.md,
 * session 30, M2). A request waiting here is kept only until its answer or the next sweep.
 */
export function bodyDeadline(app: FastifyInstance, ms: number, checkEveryMs: number): void {
  /** Requests whose body may still be arriving, by when their headers were taken (ms). */
  const arriving = new Map<FastifyRequest, number>();
  let sweeping: NodeJS.Timeout | undefined;
  const sweep = () => {
    const now = performance.now();
    for (const [request, since] of arriving) {
      const raw = request.raw;
      if (raw.complete || raw.destroyed) arriving.delete(request);
      else if (now - since >= ms) {
        arriving.delete(request);
        const socket = raw.socket;
        if (socket.writable && socket.bytesWritten === 0) {
          const body = '{"error":{"code":"INVALID_ARGUMENTS","message":"The request did not arrive whole in time."}}';
          socket.write(`HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        }
        socket.destroySoon();
      }
    }
    if (arriving.size === 0) {
      clearInterval(sweeping);
      sweeping = undefined;
    }
  };
  // Hooks that take `done` rather than async ones: these run on every request of every route, and
  // an async hook costs a promise and a turn of the microtask queue each.
  app.addHook('onRequest', (request, _reply, next) => {
    if (!request.raw.complete) {
      arriving.set(request, performance.now());
      if (!sweeping) {
        sweeping = setInterval(sweep, checkEveryMs);
        sweeping.unref();
      }
    }
    next();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    // Answered before its body arrived (the key check's 401, a call refused by its known-spent
    // rate): a body announced within the route's limit is read to its end and dropped under the
    // same deadline (the sweep cuts it if late), and its connection kept. Closed, a client going
    // on sending opened a connection a request, which cost the server more than the parse the
    // early answer saved (docs/benchmarks.md, session 36, T17). No length, or past the limit: closed.
    // Arrived whole: nothing more of it can come, so Fastify's close after a body it could not
    // parse (it closes on every parse error, the body perhaps unread) is dropped, and a flood of
    // bad bodies is not a connection each (docs/benchmarks.md, session 37, T18). Removed, not set
    // to keep-alive: Node then sends no such header and keeps the connection as HTTP/1.1 does by
    // default, or not (HTTP/1.0, the server closing), as it would have decided itself.
    if (request.raw.complete) {
      arriving.delete(request);
      // Fastify's parser sets it on the reply only; one on the raw answer is Fastify's own while
      // closing, kept.
      if (reply.getHeader('connection') === 'close' && !reply.raw.hasHeader('connection')) reply.removeHeader('connection');
    } else if (!(Number(request.headers['content-length']) <= request.routeOptions.bodyLimit)) {
      arriving.delete(request);
      reply.header('connection', 'close');
    }
    done(null, payload);
  });
  app.addHook('onClose', (_app, done) => {
    clearInterval(sweeping);
    sweeping = undefined;
    arriving.clear();
    done();
  });
}

/** What the connection slots throw for a connection past a bound: made once, as a flood meets it on every connection. */
const REFUSED = new Error('connection refused at the door');

/**
 * Applies `limits` to `server`, unless `behindProxy`: the per-address count (an IPv6 address's
 * /64), a site's (an IPv6 /48, {@link SITE_TIMES_ADDRESS} times it) and the total, closing a
 * connection past one as it opens, before it is read. With the total held, a newcomer takes the
 * place of the oldest connection of the site (an IPv4 address: itself) holding the most, when that
 * one holds at least two more than the newcomer's site (`ConcurrentSlots`, as exports share theirs):
 * refused at the total, 8 sites at their bound (8 /48s, easily had) held all 8,192 connections, every
 * other client of every tenant closed at the door (hostile review T20, session 38). Only a connection
 * with no request under way is taken back, the longest idle first; with none idle the newcomer is
 * refused (T21). Behind a proxy
 * every connection is the proxy's, which bounds its own clients: only the total applies, through
 * Node's `maxConnections`. (The request timeout is Fastify's `requestTimeout`, set where the server is made.)
 */
export function limitConnections(server: Server, limits: ConnectionLimits, behindProxy: boolean): void {
  if (behindProxy) {
    server.maxConnections = limits.total;
    return;
  }
  // Not Node's maxConnections too: it closes a connection past the total before it is heard here,
  // so none could take a place back.
  const held = new WeakMap<Socket, { slot: IdleSlot; inFlight: number }>();
  const slots = new ConcurrentSlots({ perCaller: limits.perAddress, perWorkspace: limits.perAddress * SITE_TIMES_ADDRESS, total: limits.total }, () => REFUSED);
  server.on('connection', (socket: Socket) => {
    // An IPv6 host is given a whole /64 and a site a /48: counted by address, one host took every
    // connection; counted by /64, one site did.
    const ip = socket.remoteAddress ?? '';
    const address = rateSource(ip);
    let slot: IdleSlot;
    try {
      slot = slots.takeIdle(rateSource48(ip) ?? address, address, () => socket.destroy());
    } catch {
      socket.destroy();
      return;
    }
    held.set(socket, { slot, inFlight: 0 });
    socket.once('close', slot.release);
  });
  // Only a connection with no request under way may be taken back: one cut mid-request lost its
  // client's answer, a write that may have run answered with a reset. Pipelined requests counted.
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const connection = held.get(request.socket);
    if (!connection) return;
    connection.inFlight += 1;
    connection.slot.busy();
    response.once('close', () => {
      connection.inFlight -= 1;
      if (connection.inFlight === 0) connection.slot.idle();
    });
  });
}
