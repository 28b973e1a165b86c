import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { historyDir, listUndoPoints } from '../../src/history/history-files.ts';
import { auditStatements, pastMs } from '../helpers/history.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { removeTmpfsFolder, tmpfsFolder, withRoom } from '../helpers/tmpfs.ts';

// Session 33, F10 (F9's leftover): a restore in place on a nearly full disk (a tmpfs mounted
// here), its room swept a few KiB at a time, so that it fails at each point of its way in turn:
// its undo point, its commit's WAL, opening the database over that WAL (the -shm's 32 KiB), its
// capture and audit row. A restore answered a failure must not be in the database when it is
// next opened (here by a connection of this process, as `sqlite3` or the next child would), and
// one answered ok must be.

const { mnt, refused } = tmpfsFolder('agentdb-restore-landed-', '24m', 'restore-full-disk-landed.test.ts');
const by = { who: 'operator:landed-test', via: 'operator' as const };
/** Rows changed after the moment, in commits small enough that the WAL stays far shorter than the restore's commit. */
const CHANGED = 160;

describe.runIf(!refused)('a restore in place failing on a full disk', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  let seq = 0;
  const filler = path.join(mnt, 'filler');
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `rl/a.k${++seq}` });
  const ok = (out: ExecOutcome) => expect(out.ok, JSON.stringify(out)).toBe(true);

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'rl/a');
  });
  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  /** Rows changed since the moment, as a connection opened now finds them (0: the database is as restored). */
  function changedRows(): number {
    const outside = new Database(db.path, { readonly: true });
    try {
      return (outside.prepare("SELECT count(*) AS n FROM t WHERE v LIKE 'changed%'").get() as { n: number }).n;
    } finally {
      outside.close();
    }
  }

  it('is in the database when it answered ok, and not when it answered a failure', async () => {
    ok(await write('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)'));
    for (let i = 0; i < 40; i++)
      ok(await write(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10) INSERT INTO t (v) SELECT printf('%01800d', x) FROM c`));
    const moment = Date.now();
    pastMs(moment);
    const outcomes: string[] = [];
    for (let room = 0; room < 2048 * 1024; room += 8 * 1024) {
      // What the restore takes back: rows changed a few at a time (each commit a few pages).
      if (changedRows() === 0)
        for (let i = 1; i <= CHANGED; i += 4) ok(await write(`UPDATE t SET v = printf('changed %01800d', id) WHERE id BETWEEN ${i} AND ${i + 3}`));
      ok(await pool.run({ op: 'capture', db }));
      const out = await withRoom(filler, room, () => pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 60_000 }));
      const left = changedRows();
      const noted = out.ok && (out.result as { note?: string }).note ? '(noted)' : '';
      outcomes.push(`${room / 1024}K:${out.ok ? 'ok' : out.error.code}${noted}:${left}`);
      if (out.ok) {
        expect(left, `room ${room}: answered ok, restored (${outcomes.join(' ')})`).toBe(0);
        if (outcomes.filter((o) => o.includes(':ok')).length >= 3) break;
      } else {
        expect(left, `room ${room}: answered ${out.error.code} (${out.error.detail}), not restored (${outcomes.join(' ')})`).toBe(CHANGED);
      }
    }
    const answeredOk = outcomes.filter((o) => o.includes(':ok')).length;
    expect(answeredOk, outcomes.join(' ')).toBeGreaterThan(0);
    // One whose audit row the full disk held back (noted) is settled by the next restore: no undo
    // point is left pending, and the last restore's row is in.
    ok(await write(`UPDATE t SET v = 'changed at the end' WHERE id = 1`));
    ok(await pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 60_000 }));
    expect(
      listUndoPoints(historyDir(mnt, db.id)).filter((p) => p.pending),
      outcomes.join(' '),
    ).toEqual([]);
    expect(auditStatements(db.path)).toHaveLength(1);
  });
});
