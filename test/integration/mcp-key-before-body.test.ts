import http from 'node:http';
import { expect, it } from 'vitest';
import { type KeyedApp, withListeningAgent } from '../helpers/keyed-app.ts';

// Hostile review T18 (session 37): `/mcp` looked its key up in the route's handler, after the
// body was read and parsed as JSON (up to 512 KB), so a caller with no key made the server parse
// every body it sent: 1.2 ms of CPU a 401 at 400 KB, where `/v1/calls`, which refuses an unknown
// key before its body, spent 0.75. The key is checked before the body now.

let k: KeyedApp;
let port: number;
let key: string;

withListeningAgent('mcpkey', (box) => {
  ({ k, port, key } = box);
});

const headers = (bearer: string) => ({ authorization: `Bearer ${bearer}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' });

it('refuses an unknown key before its body: one that is not JSON answers 401, not a parse error', async () => {
  const res = await k.app.inject({ method: 'POST', url: '/mcp', headers: headers('adb_made_up'), payload: '{"jsonrpc": "2.0", "id": 1, "meth' });
  // main: 400 with -32700 (the body parsed first).
  expect(res.statusCode).toBe(401);
  expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
  expect(res.json()).toMatchObject({ error: { code: -32001 } });
});

it('answers an unknown key’s 401 while its body is still arriving', async () => {
  const answer = await new Promise<number | 'no answer'>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/mcp', headers: { ...headers('adb_made_up'), 'content-length': '100000' } });
    const bound = setTimeout(() => {
      req.destroy();
      resolve('no answer');
    }, 15_000);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => {
        clearTimeout(bound);
        req.destroy();
        resolve(res.statusCode ?? 0);
      });
    });
    req.on('error', (err) => {
      clearTimeout(bound);
      reject(err);
    });
    req.write('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"DATA_QUERY_SQL","arguments":{"sql":"SELECT ');
  });
  // main: no answer (the body was awaited first).
  expect(answer).toBe(401);
});

it('still serves a good key, and tells a bad body from a good key as before', async () => {
  const list = await k.app.inject({ method: 'POST', url: '/mcp', headers: headers(key), payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
  expect(list.statusCode).toBe(200);
  expect(list.json().result.tools.length).toBeGreaterThan(0);
  const bad = await k.app.inject({ method: 'POST', url: '/mcp', headers: headers(key), payload: '{"jsonrpc": "2.0", "id": 1, "meth' });
  expect(bad.statusCode).toBe(400);
  expect(bad.json()).toMatchObject({ error: { code: -32700 } });
});
