import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Job, Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { databaseId, databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { callKey } from '../../src/contracts/call-identity.ts';

// The shapes of the report: a 90,000-character column name selected 600 times with
// `SELECT *,*,…`, a view whose column is named by a 90,000-byte literal, a view over the first
// (which DATA_DESCRIBE_SCHEMA expands for free), and the same through RETURNING. Names that long
// can no longer be made through the tools, so the database is written as one made before.
const LONG = 90_000;
const STARS = Array(600).fill('*').join(',');
const who = { workspace: 'big', agent: 'legacy', settings: { database: 'agent' as const } };

function writeLegacyDatabase(sb: Sandbox): void {
  const file = databasePath(sb.dataDir, who.workspace, who.agent, shardOf(databaseId(who.workspace, who.agent), sb.config.shardCount));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  db.exec(`CREATE TABLE wide (id INTEGER, "${'n'.repeat(LONG)}" TEXT)`);
  db.exec(`INSERT INTO wide VALUES (1, 'v')`);
  db.exec(`CREATE VIEW literal AS SELECT '${'q'.repeat(LONG)}'`);
  db.exec(`CREATE VIEW wider AS SELECT ${STARS} FROM wide`);
  // Enough ordinary tables that their description alone passes a small limit.
  for (let t = 0; t < 40; t++) {
    db.exec(`CREATE TABLE t${String(t).padStart(2, '0')} (${Array.from({ length: 100 }, (_, k) => `c${k}_${'x'.repeat(200)} TEXT DEFAULT 'd'`).join(', ')})`);
  }
  db.close();
}

interface Checked {
  env: Envelope;
  result: Record<string, unknown>;
}

/** Calls through a real worker; checks the envelope and what Redis keeps of it against `limit`. */
async function checkedCall(
  { sb, client, redis, queue, queueEvents }: { sb: Sandbox; client: AgentDbClient; redis: Redis; queue: Queue; queueEvents: QueueEvents },
  tool: string,
  args: Record<string, unknown>,
): Promise<Checked> {
  const env = (await client.call({ ...who, tool, arguments: args })) as Envelope;
  const limit = sb.config.maxResultBytes;
  expect(Buffer.byteLength(JSON.stringify(env))).toBeLessThanOrEqual(limit);
  const keys = keysFor(sb.config.prefix);
  const jobId = callKey(who.workspace, who.agent, env.callId);
  const jobKey = `${keys.bullPrefix}:${keys.queueName(shardOf(databaseId(who.workspace, who.agent), sb.config.shardCount))}:${jobId}`;
  // The completion event can reach the caller a moment before BullMQ stores the job's result.
  await (await Job.fromId(queue, jobId))!.waitUntilFinished(queueEvents);
  const stored = await redis.hget(jobKey, 'returnvalue');
  expect(Buffer.byteLength(stored!)).toBeLessThanOrEqual(limit);
  // The whole job: its result, the arguments it was called with, and BullMQ's own fields.
  const memory = (await redis.call('MEMORY', 'USAGE', jobKey, 'SAMPLES', '0')) as number;
  expect(memory).toBeLessThanOrEqual(limit + Buffer.byteLength(JSON.stringify(args)) + 16 * 1024);
  return { env, result: env.ok ? env.result : {} };
}

function expectShortened(name: string, bytes: number): void {
  expect(name.endsWith(`…[${bytes} bytes]`), name.slice(-30)).toBe(true);
  expect(Buffer.byteLength(name)).toBeLessThanOrEqual(256);
}

// With 64 KiB, 1,200 shortened column names (about 310 KB) pass half the limit; with 1 MB they fit.
describe.each([
  ['a small MAX_RESULT_BYTES', { MAX_RESULT_BYTES: String(64 * 1024) }, true],
  ['a MAX_RESULT_BYTES of 1 MiB', { MAX_RESULT_BYTES: String(1024 * 1024) }, false],
])('results within %s', (_, env, small) => {
  let sb: Sandbox;
  let client: AgentDbClient;
  let redis: Redis;
  let queue: Queue;
  let queueEvents: QueueEvents;
  const call = (tool: string, args: Record<string, unknown>) => checkedCall({ sb, client, redis, queue, queueEvents }, tool, args);

  beforeAll(async () => {
    sb = sandbox(env);
    writeLegacyDatabase(sb);
    await sb.pool();
    client = sb.client();
    redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const name = keys.queueName(shardOf(databaseId(who.workspace, who.agent), sb.config.shardCount));
    queue = new Queue(name, { connection: redis, prefix: keys.bullPrefix });
    queueEvents = new QueueEvents(name, { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    await queueEvents.waitUntilReady();
  });
  afterAll(async () => {
    await queueEvents.close();
    await queue.close();
    redis.disconnect();
    await sb.cleanup();
  });

  it('shortens a long column name and keeps the rows', async () => {
    const { env, result } = await call('DATA_QUERY_SQL', { sql: 'SELECT * FROM wide' });
    expect(env).toMatchObject({ ok: true, credits: 1, result: { rows: [[1, 'v']], truncated: false } });
    const columns = result.columns as string[];
    expect(columns[0]).toBe('id');
    expectShortened(columns[1]!, LONG);
  });

  it('SELECT *,*,… over a long-named column: names shortened; past half the limit, cut with no rows', async () => {
    const { env, result } = await call('DATA_QUERY_SQL', { sql: `SELECT ${STARS} FROM wide` });
    const columns = result.columns as string[];
    if (small) {
      expect(env).toMatchObject({ ok: true, credits: 1, result: { rows: [], truncated: true, oversize: true } });
      expect(result.note).toMatch(/the 1200 column names alone pass the result size limit, so \d+ are listed and no rows are returned/);
      expect(columns.length).toBeGreaterThan(10);
    } else {
      expect(env).toMatchObject({ ok: true, credits: 1, result: { rows: [Array(600).fill([1, 'v']).flat()], truncated: false } });
      expect(columns).toHaveLength(1200);
    }
    expectShortened(columns[1]!, LONG);
  });

  it('SELECT *,*,… over a view whose column is named by a long literal: names shortened, the row cut', async () => {
    const { env, result } = await call('DATA_QUERY_SQL', { sql: `SELECT ${STARS} FROM literal` });
    // The one row holds 600 copies of the 90,000-byte literal: it never fits.
    expect(env).toMatchObject({ ok: true, result: { rows: [], truncated: true, oversize: true } });
    expectShortened((result.columns as string[])[0]!, LONG + 2);
    if (!small) expect(result.columns).toHaveLength(600);
  });

  it('UPDATE … WHERE 0 RETURNING *,*,… is cut the same way, and the write still happens', async () => {
    const { env } = await call('DATA_WRITE_SQL', { sql: `UPDATE wide SET id = id WHERE 0 RETURNING ${STARS}` });
    expect(env).toMatchObject({ ok: true, credits: 2, result: { changes: 0, rows: [], truncated: false } });
    expect(env.ok && env.result.oversize).toBe(small ? true : undefined);
    const { env: updated } = await call('DATA_WRITE_SQL', { sql: `UPDATE wide SET id = 2 RETURNING ${STARS}` });
    expect(updated).toMatchObject({ ok: true, result: { changes: 1, rows: small ? [] : [Array(600).fill([2, 'v']).flat()], truncated: small } });
    const { env: read } = await call('DATA_QUERY_SQL', { sql: 'SELECT id FROM wide' });
    expect(read).toMatchObject({ ok: true, result: { rows: [[2]] } });
  });

  it('DATA_DESCRIBE_SCHEMA shortens every long name and, past the limit, lists the rest by name', async () => {
    const { env, result } = await call('DATA_DESCRIBE_SCHEMA', {});
    expect(env).toMatchObject({ ok: true, credits: 1, result: { truncated: true } });
    const tables = result.tables as { name: string; type: string; truncated?: true; columns?: { name: string }[] }[];
    expect(result.note).toMatch(/the schema passes the result size limit: \d+ of 43 tables and views are described in full/);
    // The view over `wide` alone would describe 1,200 columns of 256 bytes: listed by name only.
    expect(tables.find((t) => t.name === 'wider')).toEqual({ name: 'wider', type: 'view', truncated: true });
    expect(tables.length + (result.omitted as number)).toBe(43);
    const full = tables.filter((t) => !t.truncated);
    expect(full.length).toBeGreaterThan(0);
    for (const t of full) for (const c of t.columns!) expect(Buffer.byteLength(c.name)).toBeLessThanOrEqual(256);
  });

  it('caps an error that quotes a long token', async () => {
    // Two tokens of 45,000 bytes: the SQL stays within its 100 KB.
    const token = `'${'s'.repeat(LONG / 2)}'`;
    const { env: two } = await call('DATA_QUERY_SQL', { sql: `SELECT 1; ${token}` });
    expect(two).toMatchObject({ ok: false, error: { code: 'SQL_MULTIPLE_STATEMENTS', message: expect.stringMatching(/bytes cut\]$/) } });
    const { env: syntax } = await call('DATA_QUERY_SQL', { sql: `SELECT id FROM wide WHERE ${token} ${token}` });
    expect(syntax).toMatchObject({ ok: false, error: { code: 'SQL_SYNTAX', message: expect.stringMatching(/bytes cut\]$/) } });
    for (const e of [two, syntax]) expect(Buffer.byteLength(JSON.stringify(e))).toBeLessThan(2048);
  });
});
