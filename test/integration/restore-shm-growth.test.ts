import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { historyDir, listGenerations, listSegments, listUndoPoints, localSource } from '../../src/history/history-files.ts';
import { readCommits } from '../../src/history/segment-index.ts';
import { auditStatements, pastMs } from '../helpers/history.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { removeTmpfsFolder, tmpfsFolder, withRoom } from '../helpers/tmpfs.ts';

// Session 34, F11 (F9's and F10's leftover): a restore in place whose own commit lands on the
// -shm's growth point. The WAL index's first 32 KiB of the -shm map frames 1 to 4,062; frame
// 4,063 needs the next 32 KiB. A restore within the generation links its delta in as a WAL of N
// frames; its audit row is the commit after it, frames N+1 on. With N at most 4,062 and the audit
// commit past it, that commit is the one that needs the -shm to grow: on a full disk its frames
// are in the WAL and its commit is not in the index. A few KiB of room at a time down to none
// after an ok (the WAL's file as long as the delta), each answer must be true: a failure and the
// database as it was, or ok and every row restored, and no audit row coming back twice.

const { mnt, refused } = tmpfsFolder('agentdb-restore-shm-', '1200m', 'restore-shm-growth.test.ts');
const by = { who: 'operator:shm-test', via: 'operator' as const };
const ROWS = 18_000;
const PAGE = 4096;
const FRAME = PAGE + 24;
/** The last frame the -shm's first 32 KiB index. */
const FIRST_INDEXED = 4062;

describe.runIf(!refused)('a restore in place whose audit commit lands on the -shm growth point', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  let seq = 0;
  const filler = path.join(mnt, 'filler');
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `sg/a.k${++seq}` });
  const ok = (out: ExecOutcome) => expect(out.ok, JSON.stringify(out)).toBe(true);

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'sg/a');
  });
  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  function changedRows(): number {
    const outside = new Database(db.path, { readonly: true });
    try {
      return (outside.prepare("SELECT count(*) AS n FROM t WHERE v LIKE 'changed%'").get() as { n: number }).n;
    } finally {
      outside.close();
    }
  }
  /** Changes the first `rows` rows (two a page), in commits of 200 rows. */
  async function change(rows: number): Promise<void> {
    for (let i = 1; i <= rows; i += 200) ok(await write(`UPDATE t SET v = printf('changed %01800d', id) WHERE id BETWEEN ${i} AND ${Math.min(rows, i + 199)}`));
    ok(await pool.run({ op: 'capture', db }));
  }
  /** Frames of the WAL as it is now: those after its header that carry its salts (a WAL started over leaves older frames behind them). */
  const walFrames = () => {
    let fd: number;
    try {
      fd = fs.openSync(`${db.path}-wal`, 'r');
    } catch {
      return 0;
    }
    try {
      const head = Buffer.alloc(32);
      if (fs.readSync(fd, head, 0, 32, 0) < 32) return 0;
      const frame = Buffer.alloc(24);
      let n = 0;
      while (
        fs.readSync(fd, frame, 0, 24, 32 + n * FRAME) === 24 &&
        frame.readUInt32BE(8) === head.readUInt32BE(16) &&
        frame.readUInt32BE(12) === head.readUInt32BE(20)
      )
        n++;
      return n;
    } finally {
      fs.closeSync(fd);
    }
  };
  /** Frames of the restore's own commit (the delta), the one before its audit row's in history. */
  const deltaFrames = () => {
    const gen = listGenerations(localSource(mnt, db.id)).at(-1)!;
    const lines = listSegments(gen).flatMap((seg) => readCommits(seg.indexPath).map((c, i, all) => c.frames - (i > 0 ? all[i - 1]!.frames : 0)));
    return { delta: lines.at(-2)!, audit: lines.at(-1)! };
  };
  const free = () => {
    const s = fs.statfsSync(mnt);
    return s.bavail * s.bsize;
  };

  it('answers true at each room around it', async () => {
    ok(await write('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)'));
    for (let i = 0; i < ROWS; i += 500)
      ok(await write(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) INSERT INTO t (v) SELECT printf('%01800d', x) FROM c`));
    const moment = Date.now();
    pastMs(moment);
    // Calibrate: the rows whose change makes the delta plus the audit commit end at 4,063.
    let rows = 8000;
    let frames = 0;
    let took = 0;
    for (let tries = 0; tries < 6; tries++) {
      await change(rows);
      const before = free();
      ok(await pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 120_000 }));
      const { delta, audit } = deltaFrames();
      frames = delta + audit;
      took = before - free();
      console.log(`rows ${rows}: delta ${delta} frames, audit ${audit}, WAL now ${walFrames()}, room it took ${took / 1024} KiB`);
      expect(changedRows()).toBe(0);
      // Its last frame at 4,063, its first at most 4,062.
      if (delta <= FIRST_INDEXED && frames >= FIRST_INDEXED + 1) break;
      rows += 2 * (FIRST_INDEXED + 1 - frames);
    }
    const outcomes: string[] = [];
    /** A restore with `room` bytes free: its answer, checked against the database it left. */
    const attempt = async (room: number): Promise<boolean> => {
      if (changedRows() === 0) await change(rows);
      const out = await withRoom(filler, room, () => pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 120_000 }));
      const left = changedRows();
      const noted = out.ok && (out.result as { note?: string }).note ? '(noted)' : '';
      outcomes.push(`${room / 1024}K:${out.ok ? 'ok' : out.error.code}${noted}:${left}:${walFrames()}`);
      console.log(outcomes.at(-1), out.ok ? ((out.result as { note?: string }).note ?? '') : out.error.detail);
      if (out.ok) expect(left, `room ${room}: answered ok, restored (${outcomes.join(' ')})`).toBe(0);
      else {
        expect(left, `room ${room}: answered ${out.error.code} (${out.error.detail}), not restored (${outcomes.join(' ')})`).toBe(rows);
        // A full disk, said so: STORAGE_FULL (retryable), not INTERNAL "report it".
        expect(out.error.code, `room ${room}: ${out.error.detail} (${outcomes.join(' ')})`).toBe('STORAGE_FULL');
      }
      return out.ok;
    };
    // Not swept up from no room (96-137 s, each ok followed by 40 commits to change the rows
    // again): after an ok the WAL's file keeps its length (the delta's 4,061 frames and more), so
    // the next restore's delta needs no new room and the first writes that can fail are the
    // -shm's next 32 KiB, the audit's frames and the undo point's last write. Down from 64 KiB
    // 4 KiB at a time to the first refusal: ok, ok with its note (the audit commit failed at the
    // growth point), then the open over the delta fails on the -shm (STORAGE_FULL, it was
    // INTERNAL); a refusal leaves the WAL cut back, so one more try at no room ends it.
    for (let r = 64 * 1024; r >= 0 && (await attempt(r)); r -= 4 * 1024);
    await attempt(0);
    // The audit's commit failed at the growth point at least once: the restore in, its row not.
    expect(outcomes.filter((o) => o.includes('ok(noted)')).length, outcomes.join(' ')).toBeGreaterThan(0);
    console.log(outcomes.join(' '));
    ok(await write(`UPDATE t SET v = 'changed at the end' WHERE id = 1`));
    ok(await pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 120_000 }));
    expect(listUndoPoints(historyDir(mnt, db.id)).filter((p) => p.pending)).toEqual([]);
    // One audit row for each restore that answered ok, the last's among them (none twice).
    expect(auditStatements(db.path).length).toBeGreaterThan(0);
  }, 300_000);
});
