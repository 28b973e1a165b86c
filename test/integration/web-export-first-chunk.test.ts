import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { pausedGet } from '../helpers/paused-download.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// A CSV download holds one of its member's export slots until it ends in any way. One whose
// client went away before its answer began (while its first chunk was made: a big first chunk, a
// busy shard) never gave it back: the answer's stream was stopped before it started, which did
// not stop the export. After as many of them as the member's bound (a person who clicks Export
// and goes elsewhere), every later download was refused RATE_LIMITED until a restart.

let box: Sandbox;
let web: WebServer;
let cookie = '';
const open: http.IncomingMessage[] = [];

/** One export's answer, its body unread (paused). */
function startExport(): Promise<http.IncomingMessage> {
  return pausedGet(`${web.url}/data/export.csv?db=acme%2Fscout&table=wide`, { cookie, accept: 'text/html' }, open);
}

/** Shard ops' jobs on every shard's queue, whatever their state. */
async function opJobs(): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, found] = await web.redis.scan(cursor, 'MATCH', `${box.config.prefix}:{shard-*}:op.*`, 'COUNT', 1000);
    cursor = next;
    // A job's hash, not its lock or logs (`…:op.<id>:lock`).
    n += found.filter((k) => !k.slice(k.indexOf(':op.') + 4).includes(':')).length;
  } while (cursor !== '0');
  return n;
}

beforeAll(async () => {
  box = sandbox({ EXPORTS_PER_MEMBER: '1' });
  await box.pool();
  web = await startWebServer(box);
  cookie = await signedInCookie(web, 'acme', 'ada', 'member', '/inbox');
  const client = box.client();
  const write = (sql: string) =>
    client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(await write('CREATE TABLE wide(id INTEGER PRIMARY KEY, note TEXT)')).toMatchObject({ ok: true });
  // Rows of 24 MB: the first chunk (one row at least) takes a while to make, and the client leaves meanwhile.
  expect(await write(`INSERT INTO wide(note) SELECT printf('%.24000000c', 'x') FROM (SELECT 1 UNION ALL SELECT 2)`)).toMatchObject({ ok: true });
}, 120_000);

afterAll(async () => {
  for (const res of open) res.destroy();
  await web?.close();
  await box?.cleanup();
});

describe('a CSV download whose client went away while its first chunk was made', () => {
  it("gives its member's slot back", async () => {
    const gone = http.get(`${web.url}/data/export.csv?db=acme%2Fscout&table=wide`, { headers: { cookie, accept: 'text/html' } });
    gone.on('error', () => undefined);
    const closed = new Promise((r) => gone.once('close', r));
    // Its first chunk is asked for (a shard op's job exists): the export holds its slot.
    await expect.poll(opJobs, { interval: 20, timeout: 30_000 }).toBeGreaterThan(0);
    gone.destroy();
    await closed;
    const next = await vi.waitFor(
      async () => {
        const res = await startExport();
        if (res.statusCode !== 200) {
          res.destroy();
          throw new Error(`still refused: ${res.statusCode}`);
        }
        return res;
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(next.statusCode).toBe(200);
  }, 120_000);
});
