import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { FULL_DISK_NOTE } from '../../src/history/dry-run-disk.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { pastMs } from '../helpers/history.ts';
import { removeTmpfsFolder, tmpfsFolder } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// `agentdb restore --dry-run` on a full disk (a tmpfs of 8 MB mounted here) answered STORAGE_FULL:
// its reader marker, and opening a closed database (its -shm and -wal), wanted room it does not
// need, since a dry run only plans from the history index. It now answers the plan, the same one
// it gives with room, saying it was planned without writing; a real restore that must copy still
// answers STORAGE_FULL.

const { mnt, refused } = tmpfsFolder('agentdb-dry-full-', '8m', 'restore-dry-run-full-disk.test.ts');
const by = { who: 'operator:dry-run-test', via: 'operator' as const };

describe.runIf(!refused)('a restore dry run on a full disk', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  let into: DbTarget;
  let mid = 0;
  let seq = 0;
  const plan = { inPlace: {} as Record<string, unknown>, into: {} as Record<string, unknown> };
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `k${++seq}` });
  const ok = (out: ExecOutcome) => {
    expect(out.ok, JSON.stringify(out)).toBe(true);
    return (out as { result: Record<string, unknown> }).result;
  };
  const dryInPlace = () => pool.run({ op: 'restore', db, at: mid, dryRun: true, by, timeoutMs: 30_000 });
  const dryInto = () => pool.run({ op: 'restoreInto', db: into, source: db.id, from: db, at: mid, dryRun: true, by, timeoutMs: 30_000 });
  const fill = (name: string) => {
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${path.join(mnt, name)}`, 'bs=4k'], { stdio: 'pipe' });
    } catch {
      // dd stops with ENOSPC: that is the point.
    }
    expect(fs.statfsSync(mnt).bavail).toBe(0);
  };

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'full/a');
    into = historyTarget(mnt, 'full/b');
    ok(await write('CREATE TABLE t(a)'));
    for (let i = 0; i < 10; i++) ok(await write(`INSERT INTO t VALUES (${i})`));
    mid = Date.now();
    pastMs(mid);
    for (let i = 10; i < 20; i++) ok(await write(`INSERT INTO t VALUES (${i})`));
    // The plans as a dry run gives them with room.
    plan.inPlace = ok(await dryInPlace());
    plan.into = ok(await dryInto());
    expect(plan.inPlace).toMatchObject({ dryRun: true, commits: expect.any(Number) });
    expect(plan.inPlace.note).toBeUndefined();
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('answers the same plan with the database open, saying it wrote nothing; a real restore into a new database still answers STORAGE_FULL', async () => {
    fill('filler-1');
    expect(ok(await dryInPlace())).toEqual({ ...plan.inPlace, note: FULL_DISK_NOTE });
    expect(ok(await dryInto())).toEqual({ ...plan.into, note: FULL_DISK_NOTE });
    expect(await pool.run({ op: 'restoreInto', db: into, source: db.id, from: db, at: mid, by, timeoutMs: 30_000 })).toMatchObject({
      ok: false,
      error: { code: 'STORAGE_FULL' },
    });
  });

  it('answers it with the database closed too, which could not even be opened', async () => {
    // Closing removes its -wal and -shm, which gives room back: filled again after.
    ok(await pool.run({ op: 'evict', shards: [0] }));
    fill('filler-2');
    expect(ok(await dryInPlace())).toEqual({ ...plan.inPlace, note: FULL_DISK_NOTE });
    expect(ok(await dryInto())).toEqual({ ...plan.into, note: FULL_DISK_NOTE });
  });

  it('says nothing of the disk once there is room again', async () => {
    for (const f of fs.readdirSync(mnt).filter((n) => n.startsWith('filler-'))) fs.rmSync(path.join(mnt, f));
    expect(ok(await dryInPlace())).toEqual(plan.inPlace);
    expect(ok(await dryInto())).toEqual(plan.into);
  });
});
