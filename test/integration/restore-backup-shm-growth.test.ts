import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { pastMs } from '../helpers/history.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { leastRoom, removeTmpfsFolder, tmpfsFolder, withRoom } from '../helpers/tmpfs.ts';

// Session 35, F14 (F11's leftover 2): a restore in place of a database another connection holds
// open goes through SQLite's backup API (`throughSqlite`): the rebuilt file is copied over the
// live one as one commit of every page, through the live WAL. With more than 4,062 pages that
// commit needs the -shm's second 32 KiB (its WAL index maps 4,062 frames in the first). At no
// room, at the least room that answers ok (bisected) and at each room below it down through the
// growth point's refusals, and two above, each answer must be true:
// ok with every row restored (the outside connection sees it too), or refused with the database
// as it was.

const { mnt, refused } = tmpfsFolder('agentdb-restore-bshm-', '1200m', 'restore-backup-shm-growth.test.ts');
const by = { who: 'operator:bshm-test', via: 'operator' as const };
/** Two rows a page: ~5,000 pages, past the 4,062 frames the -shm's first 32 KiB index. */
const ROWS = 10_000;
const CHANGED = 400;

describe.runIf(!refused)('a restore through the backup API on a full disk, at the -shm growth point', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  let seq = 0;
  let outside: Database.Database;
  const filler = path.join(mnt, 'filler');
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `bs/a.k${++seq}` });
  const ok = (out: ExecOutcome) => expect(out.ok, JSON.stringify(out)).toBe(true);

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'bs/a');
  });
  afterAll(async () => {
    outside?.close();
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  /** Rows changed since the moment, as the outside connection reads them. */
  const changedRows = () => (outside.prepare("SELECT count(*) AS n FROM t WHERE v LIKE 'changed%'").get() as { n: number }).n;
  const change = async () => {
    ok(await write(`UPDATE t SET v = printf('changed %01800d', id) WHERE id <= ${CHANGED}`));
    ok(await pool.run({ op: 'capture', db }));
  };

  it('answers ok only with every row restored, and refuses with the database unchanged', async () => {
    ok(await write('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)'));
    for (let i = 0; i < ROWS; i += 500)
      ok(await write(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) INSERT INTO t (v) SELECT printf('%01800d', x) FROM c`));
    ok(await pool.run({ op: 'capture', db }));
    const moment = Date.now();
    pastMs(moment);
    // A program outside agentdb holding the file open: the restore goes through the backup API.
    outside = new Database(db.path, { fileMustExist: true });
    const pages = outside.pragma('page_count', { simple: true }) as number;
    expect(pages).toBeGreaterThan(4062);

    const outcomes: string[] = [];
    let shmRefusals = 0;
    const attempt = async (room: number): Promise<boolean> => {
      if (changedRows() === 0) await change();
      // The outside connection opened anew, the last one on the file: its close checkpoints and
      // removes the -shm, so each attempt's backup commit starts on a -shm of 32 KiB and meets
      // its growth point, not one an earlier restore grew.
      ok(await pool.run({ op: 'evict', shards: [0] }));
      outside.close();
      outside = new Database(db.path, { fileMustExist: true });
      changedRows();
      const shmBefore = fs.statSync(`${db.path}-shm`).size;
      const out = await withRoom(filler, room, () => pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 120_000 }));
      const left = changedRows();
      const rows = (outside.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
      const wal = fs.statSync(`${db.path}-wal`, { throwIfNoEntry: false })?.size ?? 0;
      const shm = fs.statSync(`${db.path}-shm`, { throwIfNoEntry: false })?.size ?? 0;
      outcomes.push(`${room / 1024}K:${out.ok ? 'ok' : out.error.code}:${left}:wal ${wal}:shm ${shmBefore}-${shm}`);
      console.log(outcomes.at(-1), out.ok ? ((out.result as { note?: string }).note ?? '') : out.error.detail);
      expect(rows, `room ${room}: every row there (${outcomes.join(' ')})`).toBe(ROWS);
      if (out.ok) expect(left, `room ${room}: answered ok, restored (${outcomes.join(' ')})`).toBe(0);
      else {
        expect(left, `room ${room}: answered ${out.error.code} (${out.error.detail}), not restored (${outcomes.join(' ')})`).toBe(CHANGED);
        expect(out.error.code, `room ${room}: ${out.error.detail} (${outcomes.join(' ')})`).toBe('STORAGE_FULL');
        if (out.error.detail.startsWith('disk I/O error')) shmRefusals++;
        // Every connection closed and the file opened anew (SQLite recovers its WAL index from
        // the WAL): a commit the refused restore left past the index's end would come back here.
        ok(await pool.run({ op: 'evict', shards: [0] }));
        outside.close();
        outside = new Database(db.path, { fileMustExist: true });
        expect(changedRows(), `room ${room}: refused, and still not restored once the WAL is recovered (${outcomes.join(' ')})`).toBe(CHANGED);
      }
      return out.ok;
    };
    // Bisected, not swept: the least room that answers ok (4 KiB steps), then down from it 4 KiB
    // at a time while the refusals are SQLite's "disk I/O error" (the backup's commit past the
    // -shm's growth point: its WAL is in, the index's next 32 KiB is not), and two rooms above it.
    // Bisection holds here: each attempt starts the same (every connection closed, the -shm at
    // 32 KiB, the backup's commit as long), so the answers are monotone in the room.
    const step = 4 * 1024;
    expect(await attempt(0), 'no room: refused').toBe(false);
    const least = await leastRoom(attempt, 0, 64 * 1024 * 1024, step);
    for (let r = least - step, n = 0; r >= 0 && n < 64; r -= step, n++) {
      const met = shmRefusals;
      expect(await attempt(r), `room ${r}: below the least room that answered ok (${outcomes.join(' ')})`).toBe(false);
      if (shmRefusals === met) break;
    }
    for (const r of [least + step, least + 2 * step]) expect(await attempt(r), `room ${r}: above the least ok (${outcomes.join(' ')})`).toBe(true);
    console.log(outcomes.join(' '));
    // The sweep met the growth point: SQLite's "disk I/O error" (SQLITE_IOERR_SHMSIZE) at least once.
    expect(shmRefusals, outcomes.join(' ')).toBeGreaterThan(0);
    expect(outside.pragma('integrity_check', { simple: true })).toBe('ok');
  }, 300_000);
});
