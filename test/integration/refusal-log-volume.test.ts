import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { REFUSAL_LINES_PER_MINUTE } from '../../src/http/refusal-log.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review T16 (session 36): every 4xx logged a line at info, uncharged, so one address
// sending made-up keys wrote 326,000 bytes of log per 2,000 requests, as fast as it could send
// them, onto the log disk every tenant shares. Now an address's first REFUSAL_LINES_PER_MINUTE
// refusals a minute are logged and the rest counted, said on its next line logged.

let sb: Sandbox;
let k: KeyedApp;
const lines: { msg: string; code?: string; unloggedBefore?: number }[] = [];

beforeAll(async () => {
  sb = sandbox();
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  k = keyedApp(sb, { logger: pino({ level: 'info' }, sink) });
  await k.app.ready();
});
afterAll(async () => {
  await k?.close();
  await sb?.cleanup();
});

it('logs an address’s refusals at most REFUSAL_LINES_PER_MINUTE a minute, counting the rest', async () => {
  for (let i = 0; i < 200; i++) {
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer adb_made_up_${i}`, 'content-type': 'application/json' },
      payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } },
    });
    expect(res.statusCode).toBe(401);
  }
  const refused = lines.filter((l) => l.msg === 'request refused');
  // main: 200 lines.
  expect(refused).toHaveLength(REFUSAL_LINES_PER_MINUTE);
  expect(refused.every((l) => l.code === 'UNAUTHENTICATED')).toBe(true);
});

// Session 37, T18: one IPv6 site (a /48) sending each refusal from a new /64 of its 65,536 had every
// one logged; its /64s now share 4 times an address's lines.
it('logs one IPv6 /48’s refusals at most 4 times REFUSAL_LINES_PER_MINUTE a minute, whichever /64 sends them', async () => {
  const before = lines.length;
  for (let i = 0; i < 200; i++) {
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      remoteAddress: `2001:db8:5:${(i + 1).toString(16)}::1`,
      headers: { authorization: `Bearer adb_made_up_${i}`, 'content-type': 'application/json' },
      payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } },
    });
    expect(res.statusCode).toBe(401);
  }
  const refused = lines.slice(before).filter((l) => l.msg === 'request refused');
  // main: 200 lines.
  expect(refused).toHaveLength(4 * REFUSAL_LINES_PER_MINUTE);
});
