import fs from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { restoreInPlace } from '../../src/history/restore-requests.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// A restore built from a snapshot that passed SQLite's structure check when it was made (held to
// its checksums) plus committed frames is not checked again: that check read every page a
// second time. So a snapshot must be marked only when it passed, and one that did not must
// still have each restore from it checked.

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-checked-', { handleCacheSize: 4, checkpointBytes: 64 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, nextKey } = historyCalls(() => pool);
const newest = (id: string) => listGenerations(localSource(dataDir, id)).at(-1)!;
const writer = (db: DbTarget) => (sql: string) => ok({ op: 'write', db, sql, params: [], callKey: nextKey() });
const FILL_500 =
  "INSERT INTO t(a, b) SELECT printf('a%05d', i), printf('b%05d', 999 - i) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) SELECT i FROM n)";

/**
 * Damages `table`'s root page on disk behind SQLite's back, as a disk or a program outside
 * agentdb would: over 500 rows an interior page, its right-most child now past the end of the
 * file. Answers the page's type byte as found.
 */
function damageRoot(file: string, table: string): number {
  const outside = new Database(file, { readonly: true });
  const root = outside.prepare('SELECT rootpage FROM sqlite_schema WHERE name = ?').pluck().get(table) as number;
  const pageSize = outside.pragma('page_size', { simple: true }) as number;
  outside.close();
  const header = (root - 1) * pageSize + (root === 1 ? 100 : 0);
  const fd = fs.openSync(file, 'r+');
  try {
    const type = Buffer.alloc(1);
    fs.readSync(fd, type, 0, 1, header);
    fs.writeSync(fd, Buffer.from([0x7f, 0xff, 0xff, 0xff]), 0, 4, header + 8);
    return type[0]!;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * 3,000 rows of t (4 KiB pages), a checked snapshot, then one row of the first leaf changed (a
 * page of the file's first 64 KiB chunk written since the snapshot): the moment after that, and
 * the database's dump then.
 */
async function leafChangedSinceSnapshot(db: DbTarget): Promise<{ at: number; want: string }> {
  const write = writer(db);
  await write('CREATE TABLE u(v)');
  await write('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  await write(
    "INSERT INTO t(v) SELECT printf('%.300c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) SELECT i FROM n)",
  );
  await ok({ op: 'snapshot', db, reason: 'manual' });
  await write("UPDATE t SET v = 'changed' WHERE id = 1");
  const at = Date.now();
  pastMs(at);
  return { at, want: dumpHash(db.path, { withoutAudit: true }) };
}

describe('snapshots checked as they are made', () => {
  it("a sound database's snapshot is marked checked, a fork from it equals the moment and its linked generation keeps the mark", async () => {
    const db = historyTarget(dataDir, 'checked/sound');
    const write = writer(db);
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)');
    await write('CREATE INDEX ta ON t(a)');
    await write(FILL_500);
    await ok({ op: 'snapshot', db, reason: 'manual' });
    expect(newest(db.id).snapshot!.checked).toBe(true);
    await write("UPDATE t SET b = 'changed' WHERE id % 7 = 0");
    const at = Date.now();
    pastMs(at);
    const want = dumpHash(db.path, { withoutAudit: true });
    await write('DELETE FROM t');
    const fork = historyTarget(dataDir, 'checked/fork');
    await ok({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(want);
    expect(integrity(fork.path)).toBe('ok');
    expect(newest(fork.id).snapshot!.checked).toBe(true);
  }, 60_000);

  it('a snapshot of a database damaged on disk is not marked, and a restore from it is refused by its structure check', async () => {
    const db = historyTarget(dataDir, 'checked/damaged');
    const write = writer(db);
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)');
    await write('CREATE INDEX ti ON t(a)');
    await write('CREATE TABLE u(v)');
    await write(FILL_500);
    const sound = Date.now();
    pastMs(sound);
    await ok({ op: 'snapshot', db, reason: 'manual' });
    expect(damageRoot(db.path, 't'), 'an interior table page').toBe(0x05);
    // A write elsewhere (another table's pages), so that there is something to snapshot.
    await write('INSERT INTO u VALUES (1)');
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const damaged = newest(db.id);
    expect(damaged.snapshot!.checked, 'a snapshot that fails integrity_check marked checked').toBeUndefined();
    const at = Date.now();
    pastMs(at);
    const fork = historyTarget(dataDir, 'checked/damaged-fork');
    const out = await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code, 'a fork of a damaged snapshot made without a check').toBe('HISTORY_CORRUPT');
    expect((out as { error: { detail: string } }).error.detail).toMatch(/fails PRAGMA quick_check|cannot be read: database disk image is malformed/);
    expect(fs.existsSync(fork.path)).toBe(false);
    // Before the damage, the checked generation still forks.
    const before = historyTarget(dataDir, 'checked/before-fork');
    await ok({ op: 'restoreInto', db: before, source: db.id, from: db, at: sound, by, timeoutMs: 60_000 });
    expect(integrity(before.path)).toBe('ok');
  }, 60_000);

  it("an agent's CHECK that answers differently each time (random()) neither unmarks its snapshot nor fails its restore and undo", async () => {
    // The hostile review: integrity_check evaluates CHECK constraints again, so this made every
    // restore and undo of the database fail (and one costing a second a row stalled them all).
    const db = historyTarget(dataDir, 'checked/random');
    const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: nextKey() });
    expect(await write('CREATE TABLE chk (a INTEGER CHECK (random() % 2 = 0))')).toMatchObject({ ok: true });
    let kept = 0;
    for (let i = 0; i < 40; i++) if ((await write('INSERT INTO chk VALUES (1)')).ok) kept++;
    expect(kept, 'about half the rows pass the CHECK').toBeGreaterThan(0);
    const at = Date.now();
    pastMs(at);
    await ok({ op: 'snapshot', db, reason: 'manual' });
    expect(newest(db.id).snapshot!.checked).toBe(true);
    expect(await write('DELETE FROM chk')).toMatchObject({ ok: true });
    const restored = (await ok({ op: 'restore', db, at, by, timeoutMs: 60_000 })) as { undoId: string };
    const count = async () => ((await ok({ op: 'query', db, sql: 'SELECT count(*) FROM chk', params: [], maxRows: 1 })) as { rows: number[][] }).rows[0]![0];
    expect(await count()).toBe(kept);
    await ok({ op: 'restore', db, undo: restored.undoId, by, timeoutMs: 60_000 });
    expect(await count()).toBe(0);
    // The check ran on the connection agents write through: their CHECKs hold again after it.
    expect(await write('CREATE TABLE pos (a INTEGER CHECK (a > 0))')).toMatchObject({ ok: true });
    expect(await write('INSERT INTO pos VALUES (-1)')).toMatchObject({ ok: false });
    // A fork, rebuilt from the snapshot, too.
    const fork = historyTarget(dataDir, 'checked/random-fork');
    await ok({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(((await ok({ op: 'query', db: fork, sql: 'SELECT count(*) FROM chk', params: [], maxRows: 1 })) as { rows: number[][] }).rows[0]![0]).toBe(kept);
  }, 60_000);

  it('a restore in place over a live file damaged while it was open rebuilds the moment from history instead, never answering a damaged file restored', async () => {
    // The hostile review: the seal is written by the close inside the restore, so damage made
    // while the database was open passes it; the pages the restore does not write come from the
    // live file, and only the check vouches for them.
    const db = historyTarget(dataDir, 'checked/open-damage');
    const write = writer(db);
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)');
    await write('CREATE TABLE u(v)');
    await write(FILL_500);
    await ok({ op: 'snapshot', db, reason: 'manual' });
    expect(newest(db.id).snapshot!.checked).toBe(true);
    await write('INSERT INTO u VALUES (0)');
    const at = Date.now();
    pastMs(at);
    const want = dumpHash(db.path, { withoutAudit: true });
    // Damaged on disk while the pool has it open.
    damageRoot(db.path, 't');
    await write('INSERT INTO u VALUES (1)');
    await ok({ op: 'snapshot', db, reason: 'manual' });
    await write('INSERT INTO u VALUES (2)');
    const out = await pool.run({ op: 'restore', db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code, JSON.stringify(out).slice(0, 300)).toBe('ok');
    expect(integrity(db.path)).toBe('ok');
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(want);
  }, 60_000);

  it('a restore in place over a page damaged beside one a commit wrote (compared page by page, not by chunk checksum) rebuilds the moment too', async () => {
    const db = historyTarget(dataDir, 'checked/beside');
    const write = writer(db);
    const { at, want } = await leafChangedSinceSnapshot(db);
    // Another leaf of t in that chunk, damaged while the database is open (its page type).
    const pageSize = 4096;
    const fd = fs.openSync(db.path, 'r+');
    const leaves: number[] = [];
    for (let p = 4; p <= 16; p++) {
      const head = Buffer.alloc(1);
      fs.readSync(fd, head, 0, 1, (p - 1) * pageSize);
      if (head[0] === 0x0d) leaves.push(p);
    }
    expect(leaves.length, 'table leaves in the first chunk').toBeGreaterThan(1);
    fs.writeSync(fd, Buffer.from([0x00]), 0, 1, (leaves.at(-1)! - 1) * pageSize);
    fs.closeSync(fd);
    await write('INSERT INTO u VALUES (1)');
    const out = await pool.run({ op: 'restore', db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code, JSON.stringify(out).slice(0, 300)).toBe('ok');
    expect(integrity(db.path)).toBe('ok');
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(want);
  }, 60_000);

  it('damage made while the restore runs, after the file was found closed and before its commit is written, is never answered restored', async () => {
    // The hostile review's window: comparing the live file with history before writing left
    // the pages damaged in between unchecked. The comparison is of the file the restore leaves.
    const db = historyTarget(dataDir, 'checked/window');
    const write = writer(db);
    const { at, want } = await leafChangedSinceSnapshot(db);
    await write('INSERT INTO u VALUES (1)');
    await ok({ op: 'close', path: db.path });
    const pages = fs.statSync(db.path).size / 4096;
    let damaged = 0;
    const history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
    const handles = new HandleCache({ size: 4, ...history.hooks() });
    let answered: unknown;
    try {
      answered = restoreInPlace(
        handles,
        history,
        dataDir,
        { op: 'restore', db, at, by },
        {
          step: (step) => {
            if (step !== 'undo') return;
            // A table leaf near the end of the file, which the restore does not write.
            const fd = fs.openSync(db.path, 'r+');
            for (let p = pages - 20; p <= pages && !damaged; p++) {
              const head = Buffer.alloc(1);
              fs.readSync(fd, head, 0, 1, (p - 1) * 4096);
              if (head[0] === 0x0d) {
                fs.writeSync(fd, Buffer.from([0x00]), 0, 1, (p - 1) * 4096);
                damaged = p;
              }
            }
            fs.closeSync(fd);
          },
        },
      );
    } catch (err) {
      answered = err;
    } finally {
      handles.closeAll();
    }
    expect(damaged, 'a leaf to damage').toBeGreaterThan(0);
    // Refused loudly, or restored to exactly the moment, sound: never a damaged file answered restored.
    if (!(answered instanceof Error)) {
      expect(integrity(db.path)).toBe('ok');
      expect(dumpHash(db.path, { withoutAudit: true })).toBe(want);
    }
  }, 60_000);
});
