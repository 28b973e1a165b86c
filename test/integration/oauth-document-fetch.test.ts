import { execFileSync } from 'node:child_process';
import type { lookup } from 'node:dns';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentFetcher, MAX_DOCUMENT_BYTES, publicAddress, safeFetch } from '../../src/oauth/client-metadata-document.ts';
import { DOCUMENT_READS_PER_HOUR } from '../../src/oauth/oauth-clients.ts';
import { rateSource } from '../../src/oauth/oauth-rate-source.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CALLBACK, HOST } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// How agentdb reads a client id metadata document: only from public addresses, connecting to the
// address it checked, no more than 64 KB, and no more often than an address is allowed to ask.

let dir: string;
let https: Server;
let port: number;
let ca: string;
const DOC = { client_id: '', client_name: 'Doc Desk', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-doc-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
      '-days',
      '1',
      '-subj',
      '/CN=doc.test',
      '-addext',
      'subjectAltName=DNS:doc.test',
    ],
    { stdio: 'ignore' },
  );
  ca = readFileSync(path.join(dir, 'cert.pem'), 'utf8');
  https = createServer({ key: readFileSync(path.join(dir, 'key.pem')), cert: ca }, (req, res) => {
    if (req.url === '/endless.json') {
      // A body that never ends: the reader must stop on its own, at the size limit.
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      const pump = () => {
        while (res.write(chunk)) {}
      };
      res.on('drain', pump);
      pump();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...DOC, client_id: `https://doc.test:${port}${req.url}` }));
  });
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  port = (https.address() as AddressInfo).port;
});

afterAll(async () => {
  https?.closeAllConnections();
  await new Promise((resolve) => https?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** A resolver for doc.test that answers `answers` in turn (a rebinding name), counting its calls. */
function rebinding(answers: string[]) {
  const calls: string[] = [];
  const resolve = ((hostname: string, _opts: unknown, cb: (err: Error | null, a: { address: string; family: number }[]) => void) => {
    calls.push(hostname);
    const address = answers[Math.min(calls.length - 1, answers.length - 1)]!;
    cb(null, [{ address, family: 4 }]);
  }) as unknown as typeof lookup;
  return { resolve, calls };
}

describe('reading a client id metadata document', () => {
  it('refuses NAT64, 6to4, Teredo, mapped and every other special range, before connecting', async () => {
    for (const a of [
      '64:ff9b::7f00:1',
      '64:ff9b:1::a00:1',
      '2002:7f00:1::',
      '2001::1',
      '2001:db8::1',
      '::ffff:127.0.0.1',
      '::7f00:1',
      'fc00::1',
      'fe80::1',
      '::1',
    ])
      expect(publicAddress(a), a).toBe(false);
    for (const a of ['10.0.0.1', '127.0.0.1', '169.254.169.254', '100.64.0.1', '192.0.0.8', '198.18.0.1', '203.0.113.9', '240.0.0.1', '0.1.2.3'])
      expect(publicAddress(a), a).toBe(false);
    for (const a of ['8.8.8.8', '2606:4700:4700::1111', '2a00:1450:4001::1']) expect(publicAddress(a), a).toBe(true);
    for (const url of ['https://[64:ff9b::7f00:1]/c', 'https://[2002:7f00:1::]/c']) await expect(safeFetch(url)).rejects.toThrow('not a public address');
  });

  it('connects to the address it checked: a name that resolves elsewhere the second time is not asked again', async () => {
    // 127.0.0.1 stands for a public address here; the second answer would be the private one.
    const { resolve, calls } = rebinding(['127.0.0.1', '10.9.9.9']);
    const read = documentFetcher({ resolve, isPublic: (a) => a === '127.0.0.1', ca });
    const url = `https://doc.test:${port}/client.json`;
    expect(await read(url)).toMatchObject({ client_id: url, client_name: 'Doc Desk' });
    expect(calls).toEqual(['doc.test']);
    // A name whose answer is not public is refused at the lookup, so nothing connects.
    const bad = rebinding(['10.9.9.9']);
    await expect(documentFetcher({ resolve: bad.resolve, isPublic: (a) => a === '127.0.0.1', ca })(url)).rejects.toThrow('not a public address');
  });

  it('stops reading past 64 KB, however long the body goes on', async () => {
    const { resolve } = rebinding(['127.0.0.1']);
    const read = documentFetcher({ resolve, isPublic: (a) => a === '127.0.0.1', ca });
    await expect(read(`https://doc.test:${port}/endless.json`)).rejects.toThrow(`larger than ${MAX_DOCUMENT_BYTES} bytes`);
  });
});

describe('who pays for document reads', () => {
  let box: Sandbox;
  let server: OAuthServer;
  beforeAll(async () => {
    box = sandbox();
    server = await startOAuthServer(box);
  }, 30_000);
  afterAll(async () => {
    await server?.close();
    await box?.cleanup();
  });

  const tokenFrom = (remoteAddress: string, clientId: string) =>
    server.app.inject({
      method: 'POST',
      url: '/oauth/token',
      remoteAddress,
      headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ grant_type: 'refresh_token', client_id: clientId, refresh_token: 'x' }).toString(),
    });

  it('an IPv6 address is counted by its /64', () => {
    expect(rateSource('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(rateSource('2001:db8:1:2::ffff')).toBe('2001:db8:1:2::/64');
    expect(rateSource('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(rateSource('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(rateSource('192.0.2.7')).toBe('192.0.2.7');
  });

  it('the token endpoint reads at most 30 new documents an hour for one /64; one read is cached', async () => {
    const urls = Array.from({ length: DOCUMENT_READS_PER_HOUR + 1 }, (_, i) => `https://flood.example/c/${i}.json`);
    const answers: number[] = [];
    // Every address in the /64 shares the count: an attacker given a /64 has no 2^64 budgets.
    for (const [i, url] of urls.entries()) answers.push((await tokenFrom(`2001:db8:7:7::${(i + 1).toString(16)}`, url)).statusCode);
    expect(answers.slice(0, DOCUMENT_READS_PER_HOUR).every((s) => s === 401)).toBe(true);
    const refused = await tokenFrom('2001:db8:7:7::beef', urls.at(-1)!);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: 'too_many_requests' });
    // Another /64 has its own count, and a document in the cache costs none.
    server.documents.set('https://desk.example/c.json', { ...DOC, client_id: 'https://desk.example/c.json' });
    const other = await tokenFrom('2001:db8:7:8::1', 'https://desk.example/c.json');
    expect(other.json()).toMatchObject({ error: 'invalid_grant' });
    const cached = await tokenFrom('2001:db8:7:7::1', 'https://desk.example/c.json');
    expect(cached.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('a document whose client would take more than 4 KB is no client', async () => {
    const url = 'https://big.example/c.json';
    const uris = Array.from({ length: 10 }, (_, i) => `https://big.example/${'x'.repeat(1500)}/${i}`);
    server.documents.set(url, { ...DOC, client_id: url, redirect_uris: uris });
    const res = await tokenFrom('192.0.2.50', url);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: 'invalid_client' });
  });
});
