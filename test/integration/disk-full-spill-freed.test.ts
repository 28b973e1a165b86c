import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { fullCause, toOpError } from '../../src/sqlite/sqlite-errors.ts';
import { write } from '../../src/sqlite/sqlite-write.ts';
import { fillDisk, tmpfsFolder, unmountTmpfs } from '../helpers/tmpfs.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

// A leftover of review F2 (session 27), reproduced in session 30 (F6): a write too large for the
// page cache spills pages to the WAL before its COMMIT. On a full disk that spill fails with
// SQLITE_FULL inside the statement, which SQLite says alike for the plan's size limit
// (`max_page_count`), and the executor told the two apart by the disk's free space when it
// answered. A disk freed in between (a large file deleted, an ftruncate freeing its pages as it
// goes) had more room than the plan still allowed the database, so the write was answered
// LIMIT_EXCEEDED ("drop data", not retryable) for a fault that had passed. F2 fixed only the
// COMMIT's own SQLITE_FULL (disk-full-freed-before-answer.test.ts). Here the executor's steps in
// its order: the write on the full disk, room coming back the moment it failed, then its answer.

const { mnt, refused } = tmpfsFolder('agentdb-spill-', '16m', 'disk-full-spill-freed.test.ts');

// A plan that lets the database grow by less than the 16 MB disk holds once freed; the write
// (~3 MB) fits the plan, and is three times the page cache the worker's handles keep.
const limits = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 5 * 1024 * 1024 };
const BIG = 'INSERT INTO t (k, v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000) SELECT x, randomblob(1000) FROM c';

describe.runIf(!refused)('a write that spills to the WAL on a full disk, room back before its answer', () => {
  const file = path.join(mnt, 'db.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  // As the worker's handles (handle-cache.ts, EXECUTOR_PAGE_CACHE_KIB's default).
  db.pragma('cache_size = -1024');
  let n = 0;
  /** The code the executor answers for `err` (executor-dispatch.ts: a write's SQLITE_FULL), read now. */
  const answer = (err: unknown) => toOpError(err, () => fullCause(db, file)).code;

  afterAll(() => {
    db.close();
    if (!refused) unmountTmpfs(mnt);
    fs.rmSync(mnt, { recursive: true, force: true });
  });

  it('answers STORAGE_FULL while the disk is full, whatever the disk holds by its answer', () => {
    write(db, 'CREATE TABLE t (k INTEGER, v BLOB)', [], 'create', limits);
    const filled = fillDisk(path.join(mnt, 'fill'));
    let failure: unknown;
    try {
      write(db, BIG, [], `big${++n}`, limits);
    } catch (err) {
      failure = err;
    }
    // Room back the moment it failed, before the executor words its answer.
    fs.ftruncateSync(filled.fd, 0);
    fs.closeSync(filled.fd);
    fs.rmSync(path.join(mnt, 'fill'));
    expect(failure, 'the write on the full disk went through').toBeDefined();
    expect(answer(failure)).toBe('STORAGE_FULL');
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(0);
  });

  it('commits once the disk has room again, and still answers LIMIT_EXCEEDED past the plan', () => {
    expect(write(db, BIG, [], `big${++n}`, limits).changes).toBe(3000);
    let failure: unknown;
    try {
      write(db, BIG, [], `big${++n}`, limits);
    } catch (err) {
      failure = err;
    }
    expect(answer(failure), String(failure)).toBe('LIMIT_EXCEEDED');
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(3000);
  });
});
