import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runCli } from '../helpers/processes.ts';

// A new user with no redis-server on PATH and no Redis running (session 35, N11): `npm start`
// said "run `docker compose up`", which starts the app as well as Redis, on the port `npm start`
// then takes, so following it and starting again ended in "port taken".

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-no-redis-server-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

it('says how to start Redis alone when none answers and redis-server is not on PATH', async () => {
  const run = await runCli(['start'], {
    // Node's own folder only: no redis-server to be found.
    PATH: path.dirname(process.execPath),
    REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    PORT: String(await freePort()),
    AGENTDB_PREFIX: `nors${process.pid}`,
    AGENTDB_DATA_DIR: dataDir,
  });
  expect(run.code).toBe(3);
  expect(run.stderr).toContain('redis-server is not on PATH');
  // main: "or run `docker compose up`", the whole service.
  expect(run.stderr).toContain('docker compose up -d redis');
  expect(run.stderr).toContain('then run no npm start');
});
