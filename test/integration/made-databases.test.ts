import fs from 'node:fs';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Issue 31, session 34 (P12): the worker asked the file system whether a write's database exists
// (the first write of one has the workspace's database quota checked) before every write, one
// `access` a write. agentdb never deletes a database file, so once seen it is not asked again;
// the quota is still checked for a database not yet made.
let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox({ WORKSPACE_MAX_DATABASES: '1' });
  await sb.pool();
  client = sb.client();
});
afterAll(async () => {
  vi.restoreAllMocks();
  await sb.cleanup();
});

const write = (agent: string, sql: string) =>
  client.call({ workspace: 'acme', agent, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });

it('asks the file system whether a database exists until it has seen it, and checks the quota of one not yet made', async () => {
  const looked: string[] = [];
  const existsSync = fs.existsSync;
  vi.spyOn(fs, 'existsSync').mockImplementation((p) => {
    looked.push(String(p));
    return existsSync(p);
  });
  const scout = (p: string) => p.endsWith('scout.sqlite');
  expect(await write('scout', 'CREATE TABLE t (v TEXT)')).toMatchObject({ ok: true });
  for (let i = 0; i < 5; i++) expect(await write('scout', `INSERT INTO t VALUES ('${i}')`)).toMatchObject({ ok: true, result: { changes: 1 } });
  // The first write's look (not there yet) and the second's (there): none after.
  expect(looked.filter(scout)).toHaveLength(2);
  // A second database is past the workspace's one: refused before it is made, every time.
  for (let i = 0; i < 2; i++) expect(await write('other', 'CREATE TABLE t (v TEXT)')).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
  expect(looked.filter((p) => p.endsWith('other.sqlite')).length).toBeGreaterThanOrEqual(2);
  expect(
    await client.call({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'agent' },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT count(*) FROM t' },
    }),
  ).toMatchObject({
    ok: true,
    result: { rows: [[5]] },
  });
});
