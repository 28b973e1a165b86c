import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { Metrics } from '../../src/metrics.ts';
import { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { builtExecutorChild } from '../helpers/built-child.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// `as_of` as agents send it: through the client, the queue and a shard worker, to the executor.
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
let sb: Sandbox;
let client: AgentDbClient;
let workers: ShardWorkerPool;
// The worker's /metrics counters: a read of the past counts whether its moment was kept.
const metrics = new Metrics();

beforeAll(async () => {
  sb = sandbox({ HISTORY_CAPTURE: 'on' });
  const shards = Array.from({ length: sb.config.shardCount }, (_, i) => i);
  workers = new ShardWorkerPool({ config: sb.config, shards, logger: pino({ level: 'silent' }), executorChild: builtExecutorChild, metrics });
  await workers.start();
  client = sb.client();
});
afterAll(async () => {
  await workers.stop();
  await sb.cleanup();
});

const asOfReads = async (moment: string): Promise<number> => {
  const line = (await metrics.text()).split('\n').find((l) => l.startsWith(`agentdb_as_of_reads_total{moment="${moment}"}`));
  return line ? Number(line.split(' ')[1]) : 0;
};

const call = (tool: string, args: Record<string, unknown>, callId?: string) => client.call({ ...who, tool, arguments: args, ...(callId ? { callId } : {}) });

describe('DATA_QUERY_SQL and DATA_DESCRIBE_SCHEMA with as_of', () => {
  it('read the database as it was, by time and by call id, and write nothing', async () => {
    expect((await call('DATA_WRITE_SQL', { sql: 'CREATE TABLE leads (id INTEGER PRIMARY KEY, company TEXT)' }, 'mk-leads')).ok).toBe(true);
    expect((await call('DATA_WRITE_SQL', { sql: "INSERT INTO leads (company) VALUES ('Acme')" }, 'add-acme')).ok).toBe(true);
    const afterAcme = new Date().toISOString();
    expect((await call('DATA_WRITE_SQL', { sql: "UPDATE leads SET company = 'Initech' WHERE id = 1" }, 'rename')).ok).toBe(true);

    const select = { sql: 'SELECT id, company FROM leads' };
    expect(await call('DATA_QUERY_SQL', { ...select, as_of: 'rename' })).toMatchObject({
      ok: true,
      result: { rows: [[1, 'Acme']], asOf: { restoredTo: expect.any(String) } },
    });
    expect([await asOfReads('restored'), await asOfReads('kept')]).toEqual([1, 0]);
    // Again, and a time within the same commit: the moment is kept, nothing is restored.
    expect(await call('DATA_QUERY_SQL', { sql: 'SELECT company FROM leads', as_of: 'rename' })).toMatchObject({ ok: true, result: { rows: [['Acme']] } });
    expect(await call('DATA_QUERY_SQL', { ...select, as_of: afterAcme })).toMatchObject({ ok: true, result: { rows: [[1, 'Acme']] } });
    expect([await asOfReads('restored'), await asOfReads('kept')]).toEqual([1, 2]);
    expect(await call('DATA_QUERY_SQL', { ...select, as_of: 'add-acme' })).toMatchObject({ ok: true, result: { rows: [] } });
    // Before the table: the schema as it was then.
    expect(await call('DATA_DESCRIBE_SCHEMA', { as_of: 'mk-leads' })).toMatchObject({ ok: true, result: { tables: [] } });
    expect(await call('DATA_DESCRIBE_SCHEMA', { as_of: 'rename' })).toMatchObject({ ok: true, result: { tables: [{ name: 'leads' }] } });
    // The present is untouched.
    expect(await call('DATA_QUERY_SQL', select)).toMatchObject({ ok: true, result: { rows: [[1, 'Initech']] } });
  });

  it('answers a clear error for a moment outside history, an unknown call id, and an as_of that is neither', async () => {
    expect(await call('DATA_QUERY_SQL', { sql: 'SELECT 1', as_of: '2001-01-01T00:00:00Z' })).toMatchObject({
      ok: false,
      error: { code: 'HISTORY_OUT_OF_RANGE', message: expect.stringMatching(/before the earliest moment kept, \d{4}-/) },
    });
    expect(await call('DATA_QUERY_SQL', { sql: 'SELECT 1', as_of: 'never-sent' })).toMatchObject({ ok: false, error: { code: 'AS_OF_CALL_UNKNOWN' } });
    expect(await call('DATA_QUERY_SQL', { sql: 'SELECT 1', as_of: 'last tuesday' })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
    // Writes take no as_of: the past is read-only.
    expect(await call('DATA_WRITE_SQL', { sql: 'DELETE FROM leads', as_of: 'rename' })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
    expect(await call('DATA_QUERY_SQL', { sql: 'DELETE FROM leads', as_of: 'rename' })).toMatchObject({ ok: false, error: { code: 'SQL_REFUSED' } });
  });
});
