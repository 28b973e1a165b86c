import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { removeTmpfsFolder, tmpfsFolder, withRoom } from '../helpers/tmpfs.ts';
import { fillToIndexEdge, firstFailedWrite, smallPageDatabase } from '../helpers/wal-index-edge.ts';

// Session 32, F9 (F8's leftover): a commit SQLite wrote whole on a full disk but could not enter
// in the WAL index (its -shm cannot grow: SQLITE_IOERR_SHMSIZE) is cut from the WAL by the child
// that failed it (disk-full-failed-commit-recovered.test.ts); a child killed between the failed
// commit and that cut left the frames, and the next child's open, rebuilding the index from the
// WAL, took them for a commit: the write that never answered ok was in the database. The child
// here kills itself at that moment (AGENTDB_TEST_KILL_BEFORE_TAIL_CUT); the next open cuts the
// frames past the index's end. Pages of 512 bytes: frame 4063, where the index needs its second
// 32 KiB, is 2 MB into the WAL.

const { mnt, refused } = tmpfsFolder('agentdb-killed-before-cut-', '16m', 'disk-full-killed-before-cut.test.ts');

const CHILD = fileURLToPath(new URL('../helpers/kill-before-tail-cut-child.mjs', import.meta.url));

describe.runIf(!refused)('a write that failed on a full disk, its child SIGKILLed before the cut', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  const filler = path.join(mnt, 'filler');
  let seq = 0;
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `kc/a.k${++seq}` });

  beforeAll(async () => {
    pool = new ExecutorPool({
      size: 1,
      workspaceShare: 1,
      dataDir: mnt,
      statementTimeoutMs: 30_000,
      heapLimitMb: 256,
      handleCacheSize: 4,
      maxResultBytes: 1024 * 1024,
      history: { checkpointBytes: 64 * 1024 * 1024, retentionDays: 30 },
      child: { file: CHILD, execArgv: [] },
    });
    await pool.start();
    db = historyTarget(mnt, 'kc/a');
    smallPageDatabase(db.path);
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('is not taken for a commit by the next open', async () => {
    expect(
      (await write("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 15000) INSERT INTO t (v) SELECT printf('%0100d', i) FROM c")).ok,
    ).toBe(true);
    await fillToIndexEdge(write, db.path);
    const before = pool.pids[0]!;
    // The disk full but for 7 pages: room for a commit's frames, not for the WAL index's next 32 KiB.
    const failed = await withRoom(filler, 7 * 4096, () => firstFailedWrite(write, (i) => `edge ${i}`));
    // The child died at the cut: the write's answer came from its record, read by the next child.
    expect(pool.pids[0]).not.toBe(before);
    expect(failed, 'a write failed (its child died at the cut)').toBeDefined();
    const read = await pool.run({ op: 'query', db, sql: 'SELECT count(*) FROM t WHERE v = ?', params: [failed!.v], maxRows: 1 });
    expect(read, JSON.stringify(read)).toMatchObject({ ok: true, result: { rows: [[0]] } });
    // Acknowledged writes are all there, and the database takes more.
    const ok = await pool.run({ op: 'query', db, sql: "SELECT count(*) FROM t WHERE v = 'filling'", params: [], maxRows: 1 });
    expect(ok.ok).toBe(true);
    expect((await write("INSERT INTO t (v) VALUES ('after')")).ok).toBe(true);
  });
});
