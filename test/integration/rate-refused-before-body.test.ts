import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// T17: a key whose call rate this process knows spent (Redis refused it earlier in the window)
// is refused from its headers, before its body is read and parsed, so a flood past the rate costs
// the server no parse. Shown by a request whose body never ends: it is answered at once. On main
// the route waited for the whole body first, so it was not answered at all.

let sb: Sandbox;
let k: KeyedApp;
let port: number;
const key: Record<string, string> = {};
const metrics = new Metrics();

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb, { rateLimits: { windowS: 600, keyCalls: 1, workspaceCalls: 2 }, onRefused: (quota) => metrics.refusals.inc({ quota }) });
  const profile = { displayName: 'A', settings: { database: 'agent' as const } };
  key.hog = await k.agentKey('flood', 'hog', profile);
  key.other = await k.agentKey('flood', 'other', profile);
  key.third = await k.agentKey('flood', 'third', profile);
  port = new URL(await k.app.listen({ port: 0, host: '127.0.0.1' })).port as unknown as number;
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const call = { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1 AS one' } };
const post = (bearer: string) => k.app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: `Bearer ${bearer}` }, payload: call });

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: { ok?: boolean; tool?: string; callId?: string; error?: { code: string; message: string; retryAfter?: number } };
}

/**
 * POSTs a call whose body is announced as 100,000 bytes but only its first few are ever sent:
 * the answer the server gives without the rest, or 'no answer' after 15 s (a generous bound, not
 * a timing: the body never comes, so a server that reads it answers never).
 */
function postUnendingBody(bearer: string): Promise<Answer | 'no answer'> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/calls',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', 'content-length': '100000' },
    });
    const bound = setTimeout(() => {
      req.destroy();
      resolve('no answer');
    }, 15_000);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
      });
      res.on('end', () => {
        clearTimeout(bound);
        req.destroy();
        const retryAfter = res.headers['retry-after'];
        resolve({ status: res.statusCode ?? 0, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, body: JSON.parse(text) });
      });
    });
    req.on('error', (err) => {
      clearTimeout(bound);
      reject(err);
    });
    req.write('{"tool":"DATA_QUERY_SQL","arguments":{"sql":"SELECT ');
  });
}

describe('calls refused before their body is read', () => {
  it('a key known over its rate is answered RATE_LIMITED at once, with the same message, its body never sent', async () => {
    expect((await post(key.hog!)).statusCode).toBe(200);
    // Redis refuses the second; this process remembers the key's counter spent for the window.
    const byRedis = await post(key.hog!);
    expect(byRedis.statusCode).toBe(429);
    expect(byRedis.json()).toMatchObject({ ok: false, tool: 'DATA_QUERY_SQL', error: { code: 'RATE_LIMITED' } });

    const early = await postUnendingBody(key.hog!);
    expect(early).not.toBe('no answer');
    if (early === 'no answer') return;
    expect(early.status).toBe(429);
    expect(Number(early.retryAfter)).toBeGreaterThanOrEqual(1);
    // The same code and message as Redis's refusal; the call unread, its tool is not known.
    expect(early.body).toMatchObject({
      ok: false,
      tool: '',
      error: { code: 'RATE_LIMITED', message: byRedis.json().error.message.replace(/in \d+ s/, `in ${early.retryAfter} s`) },
    });
    expect(early.body.error!.retryAfter).toBe(Number(early.retryAfter));
    expect(early.body.callId).toMatch(/^[0-9a-f-]{36}$/);
    // Counted as every rate refusal is (agentdb_quota_refusals_total).
    expect(await metrics.text()).toContain('agentdb_quota_refusals_total{quota="rate"} 2');
  });

  it('refuses nothing the rate allows: another key of the workspace calls, until the workspace is spent', async () => {
    expect((await post(key.other!)).statusCode).toBe(200);
    // The workspace's 2 are spent (hog's 1, other's 1): Redis refuses third's first call, then
    // the process knows it and refuses every key of the workspace before the body.
    const byRedis = await post(key.third!);
    expect(byRedis.statusCode).toBe(429);
    expect(byRedis.json().error.message).toContain('Workspace flood may make 2 calls per 600 s');
    const early = await postUnendingBody(key.other!);
    expect(early).not.toBe('no answer');
    if (early === 'no answer') return;
    expect(early.status).toBe(429);
    expect(early.body.error).toMatchObject({ code: 'RATE_LIMITED', message: expect.stringContaining('Workspace flood may make 2 calls per 600 s') });
  });

  it('an unknown key is refused before its body too (UNAUTHENTICATED)', async () => {
    const early = await postUnendingBody('adb_not-a-key');
    expect(early).not.toBe('no answer');
    if (early === 'no answer') return;
    expect(early.status).toBe(401);
    expect(early.body).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
  });

  it('keeps the connection of a request refused before its body, the body arriving whole: a flood is not a connection a refusal', async () => {
    // Closed after each early answer (main), a client going on sending opened a connection a
    // request, which cost the server more than the parse saved.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    const headers: string[] = [];
    const body = JSON.stringify({ ...call, arguments: { sql: `SELECT 1 /* ${'x'.repeat(20_000)} */` } });
    try {
      for (const bearer of ['adb_not-a-key', key.hog!, 'adb_not-a-key', key.hog!]) {
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.request(
            {
              host: '127.0.0.1',
              port,
              method: 'POST',
              path: '/v1/calls',
              agent,
              headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
            },
            (res) => {
              sockets.add(res.socket);
              headers.push(String(res.headers.connection));
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            },
          );
          req.on('error', reject);
          req.end(body);
        });
        expect([401, 429]).toContain(status);
      }
    } finally {
      agent.destroy();
    }
    expect(headers).toEqual(['keep-alive', 'keep-alive', 'keep-alive', 'keep-alive']);
    expect(sockets.size).toBe(1);
  });
});
