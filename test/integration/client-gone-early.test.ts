import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 27 (G1, 5): /mcp's fast path listened for the response's 'close' only after an
// await (the key's lookup). A client gone during it had closed already, no 'close' came again,
// and its call's wait went on for nobody until the HTTP wait limit. Here the key's lookup is
// held while a real socket is destroyed, then let go. Since session 37 (T18) /mcp, as /v1/calls
// did, looks its key up in an onRequest hook, before the body is read: a client gone during it
// has its request end there (Node destroys the request with its socket, and Fastify never reads
// the body), so nothing is run, for nobody.

let sb: Sandbox;
let k: KeyedApp;
let port: number;
let bearer: string;
/** The next key lookup waits for `release` after calling `entered`. */
let hold: { entered: () => void; release: Promise<void>; done: () => void } | undefined;
/** Calls into the keyed-call core made, and those not settled yet. */
const core = { started: 0, pending: 0 };

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // Waits far longer than the test: only their clients going away ends them.
  k = keyedApp(sb, { waitMs: 600_000, approvalWaitMs: 600_000 });
  bearer = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  const lookUp = KeyAuthenticator.prototype.authenticate;
  vi.spyOn(KeyAuthenticator.prototype, 'authenticate').mockImplementation(async function (this: KeyAuthenticator, token: string) {
    const h = hold;
    hold = undefined;
    if (!h) return lookUp.call(this, token);
    h.entered();
    await h.release;
    try {
      return await lookUp.call(this, token);
    } finally {
      h.done();
    }
  });
  for (const name of ['call', 'result'] as const) {
    const own = k.calls[name].bind(k.calls) as (...args: unknown[]) => Promise<unknown>;
    vi.spyOn(k.calls, name).mockImplementation(((...args: unknown[]) => {
      core.started++;
      core.pending++;
      const p = own(...args);
      const settled = () => void core.pending--;
      p.then(settled, settled);
      return p;
    }) as never);
  }
  const url = new URL(await k.app.listen({ port: 0, host: '127.0.0.1' }));
  port = Number(url.port);
});
afterAll(async () => {
  vi.restoreAllMocks();
  await k.close();
  await sb.cleanup();
});

/**
 * Sends `path` a POST of `body` on a raw socket, destroys the socket while the server looks up
 * its key, and lets the lookup go once the server has seen the socket close.
 */
async function leaveDuringKeyLookup(path: string, body: unknown): Promise<void> {
  let entered!: () => void;
  const inLookup = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  let done!: () => void;
  const lookedUp = new Promise<void>((r) => (done = r));
  hold = { entered, release: new Promise<void>((r) => (release = r)), done };
  const serverSide = new Promise<Socket>((r) => k.app.server.once('connection', r));
  const json = JSON.stringify(body);
  const socket = connect(port, '127.0.0.1');
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${bearer}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
  const server = await serverSide;
  const closed = new Promise((r) => server.once('close', r));
  await inLookup;
  socket.destroy();
  await closed;
  release();
  await lookedUp;
  // A request of its own through the same server after it: whatever the first one's body, held
  // in the server's buffers, would have set going has been by the time this one is answered.
  await fetch(`http://127.0.0.1:${port}/v1/calls`, { method: 'POST' });
}

const idle = { calls: 0, waits: 0, looks: 0 };

for (const [route, path, body] of [
  [
    'a plain MCP tools/call',
    '/mcp',
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE early_mcp (x)' } } },
  ],
  ['a /v1/calls call', '/v1/calls?wait=true', { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE early_v1 (x)' } }],
] as const) {
  it(`${route} whose client left while its key was looked up runs nothing and waits for nobody`, async () => {
    const before = core.started;
    await leaveDuringKeyLookup(path, body);
    // Before session 27 the wait for /mcp's call held on for the HTTP wait limit (600 s here);
    // before session 37 /mcp still ran the call, for nobody.
    expect(core.started).toBe(before);
    expect(k.client.waitCounts()).toEqual(idle);
    expect(k.calls.waiting()).toBe(0);
  }, 30_000);
}
