import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { markRestoreLeaving } from '../../src/history/seal.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// Every handle of a database closed (the WAL checkpointed and deleted), then the next write
// starts a WAL with salts capture has never seen. Usually nothing happened in between and the
// generation goes on; but if another program wrote meanwhile, history must notice, even when
// the file kept its size (a write into free pages) or its first page (an update in place).
let dataDir: string;
let pool: ExecutorPool;

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-outside-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 1024 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const target = (id: string): DbTarget => historyTarget(dataDir, id);
let seq = 0;
const ok = (req: ExecRequest): Promise<unknown> => mustRun(pool, req);
const write = (db: DbTarget, sql: string, params: (string | number | null)[] = []) => ok({ op: 'write', db, sql, params, callKey: `k${++seq}` });
const closeAll = () => ok({ op: 'evict', shards: [0] });

/** A table of rows with room freed inside the file: 40 rows of 2 KB, then most deleted. */
async function withFreePages(db: DbTarget): Promise<void> {
  await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  for (let i = 0; i < 40; i++) await write(db, 'INSERT INTO t(v) VALUES (?)', [`${i}-${'a'.repeat(2000)}`]);
  await write(db, 'DELETE FROM t WHERE id > 5');
}

/** Restores `id` to now from its history and checks it equals the live file, row for row. */
function expectRestoreMatchesLive(db: DbTarget): void {
  const at = Date.now();
  pastMs(at);
  const file = path.join(dataDir, `check-${seq}.sqlite`);
  buildRestore(planRestore(localSource(dataDir, db.id), { at }), file);
  try {
    expect(integrity(file)).toBe('ok');
    expect(dumpHash(file)).toBe(dumpHash(db.path));
  } finally {
    fs.rmSync(file, { force: true });
  }
}

function outside(db: DbTarget, sql: string): void {
  const conn = new Database(db.path);
  try {
    conn.prepare(sql).run();
    conn.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    conn.close();
  }
}

describe('history across closes, and writes from outside', () => {
  it('goes on in the same generation when every handle closed and nothing else wrote', async () => {
    const db = target('out/calm');
    await withFreePages(db);
    const before = listGenerations(localSource(dataDir, db.id));
    await closeAll();
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['after the close']);
    await closeAll();
    await write(db, 'UPDATE t SET v = ? WHERE id = 1', ['and again']);
    // No snapshot per reopen: the seal left by the last close carries the generation on.
    expect(listGenerations(localSource(dataDir, db.id))).toHaveLength(before.length);
    expectRestoreMatchesLive(db);
  });

  it('starts a new generation after an outside write into free pages, which leaves the file its size', async () => {
    const db = target('out/free');
    await withFreePages(db);
    await closeAll();
    const size = fs.statSync(db.path).size;
    outside(db, `INSERT INTO t(v) VALUES ('outside-' || hex(randomblob(1500)))`);
    // What makes this case: the file's size alone cannot tell anything happened.
    expect(fs.statSync(db.path).size).toBe(size);
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['after the outside write']);
    expect(listGenerations(localSource(dataDir, db.id)).at(-1)!.snapshot!.reason).toBe('gap');
    expectRestoreMatchesLive(db);
  });

  it('starts a new generation after an outside update in place, made right after the last close', async () => {
    const db = target('out/inplace');
    await withFreePages(db);
    await closeAll();
    const size = fs.statSync(db.path).size;
    // Same length, same pages: only the bytes of one row change, within the clock's tick.
    outside(db, `UPDATE t SET v = replace(v, 'a', 'b') WHERE id = 3`);
    expect(fs.statSync(db.path).size).toBe(size);
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['after the outside update']);
    expect(listGenerations(localSource(dataDir, db.id)).at(-1)!.snapshot!.reason).toBe('gap');
    expectRestoreMatchesLive(db);
  });
  // A restore in place folds its commit into the file uncaptured, then begins a generation; one
  // that failed in between leaves the old generation marked, and the next capture must see a
  // gap whether the WAL restarted under an open handle (salt-1 + 1) or after the last close.
  for (const closed of [false, true]) {
    it(`starts a new generation after a restore left half-way${closed ? ', the handles then closed' : ''}`, async () => {
      const db = target(closed ? 'out/half-closed' : 'out/half-open');
      await withFreePages(db);
      const source = localSource(dataDir, db.id);
      const before = listGenerations(source);
      markRestoreLeaving(before.at(-1)!.dir);
      outside(db, `UPDATE t SET v = 'restored' WHERE id = 2`);
      if (closed) await closeAll();
      await write(db, 'INSERT INTO t(v) VALUES (?)', ['after the half restore']);
      const gens = listGenerations(source);
      expect(gens).toHaveLength(before.length + 1);
      expect(gens.at(-1)!.snapshot!.reason).toBe('gap');
      expectRestoreMatchesLive(db);
    });
  }
});
