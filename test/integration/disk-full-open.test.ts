import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.ts';
import { historyView } from '../../src/history/history-view.ts';
import { localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { dumpHash, pastMs } from '../helpers/history.ts';
import { fillToLastByte, removeTmpfsFolder, tmpfsFolder } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// Opening a database on a full disk (a tmpfs of 8 MB mounted here): a database whose handles
// were closed (a restart, an idle close) needs room for its -shm and -wal files to open, and
// SQLite says only "disk I/O error" (SQLITE_IOERR_*), which answered INTERNAL. It is the full
// disk: STORAGE_FULL (retryable), the executor child lives on, and reads and writes work again
// by themselves once there is room, with nothing lost from the data or from history.

const { mnt, refused } = tmpfsFolder('agentdb-open-full-', '8m', 'disk-full-open.test.ts');

describe.runIf(!refused)('opening a database on a full disk', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  let fresh: DbTarget;
  const filler = path.join(mnt, 'filler');
  let seq = 0;

  const read = (target: DbTarget, sql = 'SELECT a FROM t ORDER BY a') => pool.run({ op: 'query', db: target, sql, params: [], maxRows: 1000 });
  const write = (target: DbTarget, sql: string) => pool.run({ op: 'write', db: target, sql, params: [], callKey: `k${++seq}` });
  const ok = (out: ExecOutcome) => {
    expect(out.ok, JSON.stringify(out)).toBe(true);
    return out;
  };

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'full/a');
    fresh = historyTarget(mnt, 'full/new');
    ok(await write(db, 'CREATE TABLE t(a)'));
    for (let i = 0; i < 20; i++) ok(await write(db, `INSERT INTO t VALUES (${i})`));
    // Every handle closed, as after a restart or an idle close; then the disk fills to the last byte.
    ok(await pool.run({ op: 'evict', shards: [0] }));
    fillToLastByte(filler);
    expect(fs.statfsSync(mnt).bavail).toBe(0);
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('answers reads and writes STORAGE_FULL (retryable), not INTERNAL, and the child lives on', async () => {
    const pid = pool.pids[0];
    for (const out of [await read(db), await write(db, 'INSERT INTO t VALUES (1000)'), await write(fresh, 'CREATE TABLE x(a)')]) {
      expect(out, JSON.stringify(out)).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
    }
    expect(ERRORS.STORAGE_FULL.retryable).toBe(true);
    expect(pool.pids).toEqual([pid]);
  });

  it('works again by itself once there is room, with nothing lost from the data or from history', async () => {
    fs.rmSync(filler);
    expect(ok(await read(db))).toMatchObject({ result: { rows: Array.from({ length: 20 }, (_, i) => [i]) } });
    ok(await write(db, 'INSERT INTO t VALUES (1000)'));
    ok(await write(fresh, 'CREATE TABLE x(a)'));
    expect(ok(await read(db))).toMatchObject({ result: { rows: [...Array.from({ length: 20 }, (_, i) => [i]), [1000]] } });
    // History went on in its generation: nothing lost, nothing damaged, a restore equals the file.
    ok(await pool.run({ op: 'capture', db }));
    const view = historyView(mnt, db.id, 30);
    expect(view.lost).toEqual([]);
    expect(view.generations.map((g) => [g.reason, g.damaged])).toEqual([['first', undefined]]);
    ok(await pool.run({ op: 'evict', shards: [0] }));
    const at = Date.now();
    pastMs(at);
    const file = path.join(mnt, 'restored.sqlite');
    buildRestore(planRestore(localSource(mnt, db.id), { at }), file);
    expect(dumpHash(file)).toBe(dumpHash(db.path));
  });
});
