import { getEventListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownSignalFetch } from '../../bench/own-signal-fetch.ts';

// The bench's fetch for the SDK client: the session's long-lived signal must not collect a
// listener per request (undici's, removed only by a garbage collection), and must still abort.

let server: http.Server;
let url: string;
let held: http.ServerResponse[] = [];
let arrived: (() => void) | undefined;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.url === '/hold') {
      held.push(res);
      arrived?.();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const res of held) res.destroy();
  held = [];
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('ownSignalFetch', () => {
  it('leaves no listener on the caller’s signal once each answer is in', async () => {
    const session = new AbortController();
    for (let i = 0; i < 300; i++) {
      const res = await ownSignalFetch(`${url}/`, { method: 'POST', body: '{}', signal: session.signal });
      expect(await res.json()).toEqual({ ok: true });
    }
    expect(getEventListeners(session.signal, 'abort')).toHaveLength(0);
  });

  it('aborts a request in flight when the caller’s signal aborts', async () => {
    const session = new AbortController();
    const there = new Promise<void>((resolve) => (arrived = resolve));
    const pending = ownSignalFetch(`${url}/hold`, { signal: session.signal });
    await there;
    session.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(getEventListeners(session.signal, 'abort')).toHaveLength(0);
  });
});
