import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
});
afterAll(() => sb.cleanup());

const scout = { workspace: 'acme', agent: 'scout', settings: { database: 'workspace' as const, sharedData: true } };

async function call(tool: string, args: unknown, who: Partial<CallInput> = {}): Promise<Envelope> {
  return (await client.call({ ...scout, ...who, tool, arguments: args })) as Envelope;
}

function rows(env: Envelope) {
  if (!env.ok) throw new Error(`${env.error.code}: ${env.error.message}`);
  return env.result.rows as unknown[][];
}

describe('the four tools through the queue', () => {
  it('creates, writes, reads and describes an agent database', async () => {
    const created = await call('DATA_WRITE_SQL', {
      sql: 'CREATE TABLE IF NOT EXISTS leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, stage TEXT)',
    });
    expect(created).toMatchObject({ ok: true, tool: 'DATA_WRITE_SQL', credits: 2, untrusted: true });

    const inserted = await call('DATA_WRITE_SQL', {
      sql: 'INSERT OR IGNORE INTO leads (email, stage) VALUES (?, ?), (?, ?) RETURNING id, email',
      params: ['ada@northwind.io', 'new', 'bo@northwind.io', 'emailed'],
    });
    expect(inserted).toMatchObject({ ok: true, result: { changes: 2 } });
    expect(rows(inserted)).toEqual([
      [1, 'ada@northwind.io'],
      [2, 'bo@northwind.io'],
    ]);

    const queried = await call('DATA_QUERY_SQL', { sql: 'SELECT email FROM leads WHERE stage = ?', params: ['emailed'] });
    expect(queried).toMatchObject({ ok: true, credits: 1, untrusted: true, result: { columns: ['email'], truncated: false } });
    expect(rows(queried)).toEqual([['bo@northwind.io']]);

    const described = await call('DATA_DESCRIBE_SCHEMA', {});
    expect(described).toMatchObject({ ok: true, credits: 1 });
    const tables = (described as unknown as { result: { tables: { name: string; rowCount: number }[] } }).result.tables;
    expect(tables.map((t) => [t.name, t.rowCount])).toEqual([['leads', 2]]);
  });

  it('leaves no timer behind once a call is answered', async () => {
    // Each call arms a NO_WORKER timer (30 s by default); a runtime making thousands of calls a
    // second must not carry thousands of them, all firing later in the middle of other work.
    const timeoutMs = 12_345;
    const armed = new Set<unknown>();
    const setSpy = vi.spyOn(globalThis, 'setTimeout');
    const clearSpy = vi.spyOn(globalThis, 'clearTimeout');
    try {
      for (let i = 0; i < 20; i++) await client.call({ ...scout, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: [i] } }, { timeoutMs });
      await client.call({ ...scout, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, { timeoutMs, wait: false });
      setSpy.mock.calls.forEach((args, i) => {
        if (args[1] === timeoutMs) armed.add(setSpy.mock.results[i]!.value);
      });
      expect(armed.size).toBeGreaterThanOrEqual(21);
      const cleared = new Set(clearSpy.mock.calls.map((args) => args[0]));
      expect([...armed].filter((t) => !cleared.has(t as never))).toEqual([]);
    } finally {
      setSpy.mockRestore();
      clearSpy.mockRestore();
    }
  });

  it('truncates at max_rows and says so', async () => {
    const env = await call('DATA_QUERY_SQL', {
      sql: 'WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 50) SELECT x FROM n',
      max_rows: 10,
    });
    expect(rows(env)).toHaveLength(10);
    expect(env).toMatchObject({ result: { truncated: true } });
  });

  it('keeps each agent in its own database, and the shared one apart', async () => {
    await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE notes (body TEXT)' }, { agent: 'outreach' });
    await call('DATA_WRITE_SQL', { sql: "INSERT INTO notes VALUES ('mine')" }, { agent: 'outreach' });
    const own = await call('DATA_QUERY_SQL', { sql: 'SELECT body FROM notes' });
    expect(own).toMatchObject({ ok: false, error: { code: 'SQL_ERROR' } });

    const other = await call('DATA_QUERY_SQL', { sql: 'SELECT body FROM notes', agent: 'outreach' });
    expect(rows(other)).toEqual([['mine']]);
    const write = await call('DATA_WRITE_SQL', { sql: "INSERT INTO notes VALUES ('x')", agent: 'outreach' });
    expect(write).toMatchObject({ ok: false, error: { code: 'NOT_PERMITTED' } });

    await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE shared_leads (email TEXT)', scope: 'workspace' });
    const shared = await call('DATA_DESCRIBE_SCHEMA', { scope: 'workspace' });
    expect((shared as unknown as { result: { tables: { name: string }[] } }).result.tables.map((t) => t.name)).toEqual(['shared_leads']);
  });

  it('refuses what the guard refuses, with a stable code, and changes nothing', async () => {
    const cases: [string, unknown, string][] = [
      ['DATA_QUERY_SQL', { sql: 'PRAGMA table_info(leads)' }, 'SQL_REFUSED'],
      ['DATA_QUERY_SQL', { sql: "SELECT * FROM 'sqlite_master'" }, 'SQL_REFUSED'],
      ['DATA_QUERY_SQL', { sql: 'SELECT 1; DELETE FROM leads' }, 'SQL_MULTIPLE_STATEMENTS'],
      ['DATA_QUERY_SQL', { sql: 'DELETE FROM leads' }, 'SQL_REFUSED'],
      ['DATA_WRITE_SQL', { sql: 'DROP TABLE leads' }, 'SQL_REFUSED'],
      ['DATA_WRITE_SQL', { sql: 'ATTACH DATABASE "/tmp/x.db" AS x' }, 'SQL_REFUSED'],
      ['DATA_WRITE_SQL', { sql: 'CREATE TRIGGER t AFTER INSERT ON leads BEGIN DELETE FROM leads; END' }, 'SQL_REFUSED'],
      ['DATA_WRITE_SQL', { sql: 'SELEC 1' }, 'SQL_SYNTAX'],
    ];
    for (const [tool, args, code] of cases) {
      expect(await call(tool, args), JSON.stringify(args)).toMatchObject({ ok: false, tool, error: { code } });
    }
    expect(rows(await call('DATA_QUERY_SQL', { sql: 'SELECT count(*) FROM leads' }))).toEqual([[2]]);
  });

  it('refuses drops outright in a sandbox, where nothing can wait for a person', async () => {
    const sandboxed = await call('DATA_DROP_TABLE', { table: 'leads' }, { settings: { database: 'agent', sandbox: true } });
    expect(sandboxed).toMatchObject({ ok: false, error: { code: 'SANDBOX_REFUSED' } });
    expect(rows(await call('DATA_QUERY_SQL', { sql: 'SELECT count(*) FROM leads' }))).toEqual([[2]]);
  });

  it('answers bad input at once with an error envelope', async () => {
    const env = await client.call({ ...scout, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: [{ a: 1 }] } });
    expect(env).toMatchObject({ ok: false, tool: 'DATA_QUERY_SQL', error: { code: 'INVALID_ARGUMENTS' } });
    expect((env as Envelope).callId).toMatch(/^[0-9a-f-]{36}$/);
    const off = await client.call({ workspace: 'acme', agent: 'scout', tool: 'DATA_DESCRIBE_SCHEMA' });
    expect(off).toMatchObject({ ok: false, error: { code: 'DATABASE_OFF' } });
  });

  it('answers concurrent calls across shards', async () => {
    const agents = Array.from({ length: 20 }, (_, i) => `agent-${i}`);
    const answers = await Promise.all(agents.map((agent) => call('DATA_QUERY_SQL', { sql: 'SELECT ? AS who', params: [agent] }, { agent })));
    expect(answers.map((a) => rows(a)[0]![0])).toEqual(agents);
  });

  it('meters credits per workspace, agent, tool and day', async () => {
    await call('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { workspace: 'metered', agent: 'm1' });
    await call('DATA_QUERY_SQL', { sql: 'SELECT 1' }, { workspace: 'metered', agent: 'm1' });
    await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE t (x)' }, { workspace: 'metered', agent: 'm1' });
    await call('DATA_DESCRIBE_SCHEMA', {}, { workspace: 'metered', agent: 'm2' });
    await call('DATA_QUERY_SQL', { sql: 'PRAGMA x' }, { workspace: 'metered', agent: 'm2' });
    const redis = connectRedis(sb.config.redisUrl);
    const usage = await readUsage(redis, keysFor(sb.config.prefix), 'metered');
    redis.disconnect();
    const day = new Date().toISOString().slice(0, 10);
    expect(usage.map(({ agent, tool, calls, credits }) => [agent, tool, calls, credits])).toEqual([
      ['m1', 'DATA_QUERY_SQL', 2, 2],
      ['m1', 'DATA_WRITE_SQL', 1, 2],
      ['m2', 'DATA_DESCRIBE_SCHEMA', 1, 1],
    ]);
    expect(usage.every((u) => u.day === day)).toBe(true);
  });
});
