import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { fullCause, toOpError } from '../../src/sqlite/sqlite-errors.ts';
import { write } from '../../src/sqlite/sqlite-write.ts';
import { fillDisk, tmpfsFolder, unmountTmpfs } from '../helpers/tmpfs.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

// Fault review F2 (session 27): a write that failed for want of room on a full disk, answered once
// room was back, was answered LIMIT_EXCEEDED (the plan's size limit: drop data, don't retry) for a
// database of a few hundred rows. SQLite says SQLITE_FULL for both, and the executor tells them
// apart by the disk's free space when it answers: a disk freed in between (an operator, or a
// large file deleted, a second or two into the fault) had more room than the plan still allows
// the database, so the limit took the blame. The driver bench/disk-full-ledger.ts saw 1 such of
// 109 refusals, on a 128 MB data disk over a 100 MB plan. A COMMIT's SQLITE_FULL is the disk:
// every page it writes was allocated, under max_page_count, by the statement before it. Here the
// executor's own steps, in its order: the write, room coming back, then the answer's code.

const { mnt, refused } = tmpfsFolder('agentdb-freed-', '8m', 'disk-full-freed-before-answer.test.ts');

// A plan that lets the database grow by less than the 8 MB disk holds once freed.
const limits = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 2 * 1024 * 1024 };

describe.runIf(!refused)('a write refused by a full disk whose room came back before its answer', () => {
  const file = path.join(mnt, 'db.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  let k = 0;
  const insert = (bytes = 500) => write(db, 'INSERT INTO t (k, v) VALUES (?, ?)', [++k, 'x'.repeat(bytes)], `c${k}`, limits);
  /** The code the executor answers for `err` (executor-dispatch.ts: a write's SQLITE_FULL). */
  const answer = (err: unknown) => toOpError(err, () => fullCause(db, file)).code;

  afterAll(() => {
    db.close();
    if (!refused) unmountTmpfs(mnt);
    fs.rmSync(mnt, { recursive: true, force: true });
  });

  it('answers STORAGE_FULL, not the plan limit, and the write goes through once sent again', () => {
    write(db, 'CREATE TABLE t (k INTEGER, v TEXT)', [], 'create', limits);
    for (let i = 0; i < 20; i++) insert();
    const filled = fillDisk(path.join(mnt, 'fill'));
    let failure: unknown;
    try {
      insert();
    } catch (err) {
      failure = err;
    }
    expect(failure, 'the write on the full disk went through').toBeDefined();
    fs.ftruncateSync(filled.fd, 0);
    fs.closeSync(filled.fd);
    expect(answer(failure)).toBe('STORAGE_FULL');
    // Retryable, as its code says: the same write now commits.
    expect(insert().changes).toBe(1);
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(21);
  });

  it('still answers LIMIT_EXCEEDED for a write past the plan limit, with room on the disk', () => {
    let failure: unknown;
    try {
      insert(3 * 1024 * 1024);
    } catch (err) {
      failure = err;
    }
    expect(answer(failure)).toBe('LIMIT_EXCEEDED');
  });
});
