import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { dumpHash, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// docs/history.md: "a history file failing its check (HISTORY_CORRUPT)" leaves the database exactly
// as it was. A byte rotting in a snapshot moves neither its size nor its mtime (nor does a tool
// that rewrites a file and keeps its times, rsync or cp -p), which is all a restore looked at
// before hashing 100 MB; the chunk checksums written with each snapshot find it.

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-bitrot-', { handleCacheSize: 4, checkpointBytes: 64 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, nextKey } = historyCalls(() => pool);

describe('a snapshot rotted in place, its size and mtime unchanged', () => {
  it('is refused as HISTORY_CORRUPT by a restore in place that reads the page, and by a fork that copies the file', async () => {
    const db = historyTarget(dataDir, 'rot/main');
    await ok({ op: 'write', db, sql: 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: nextKey() });
    await ok({
      op: 'write',
      db,
      sql: "INSERT INTO t(v) SELECT printf('%.500c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)",
      params: [],
      callKey: nextKey(),
    });
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const at = Date.now();
    pastMs(at);
    await ok({ op: 'write', db, sql: "UPDATE t SET v = 'changed' WHERE id % 10 = 0", params: [], callKey: nextKey() });
    const before = dumpHash(db.path, { withoutAudit: true });
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    const file = gen.snapshotPath;
    const st = fs.statSync(file);
    const ns = fs.statSync(file, { bigint: true }).mtimeNs;
    // One byte of a row that the UPDATE changed (row 10's text), as a disk flips it.
    const bytes = fs.readFileSync(file);
    const row10 = bytes.indexOf(Buffer.from('x'.repeat(500)), 4096 * 2);
    expect(row10).toBeGreaterThan(0);
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, Buffer.from('y'), 0, 1, row10 + 250);
    fs.closeSync(fd);
    execFileSync('touch', ['-m', '-d', `@${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, '0')}`, file]);
    expect(fs.statSync(file).mtimeMs).toBe(st.mtimeMs);
    const out = await pool.run({ op: 'restore', db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code, 'a rotted snapshot restored from').toBe('HISTORY_CORRUPT');
    expect((out as { error: { detail: string } }).error.detail).toContain(`snapshot ${gen.name} is damaged`);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
    // A fork copies the whole snapshot: the copy is held to every chunk's checksum.
    const fork = historyTarget(dataDir, 'rot/fork');
    const forked = await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(forked.ok ? 'ok' : forked.error.code).toBe('HISTORY_CORRUPT');
    expect(fs.existsSync(fork.path)).toBe(false);
  }, 60_000);

  it('a fork to a moment the database was smaller than its snapshot copies only what it kept, held to the checksums of those chunks', async () => {
    const db = historyTarget(dataDir, 'rot/shrunk');
    const write = (sql: string) => ok({ op: 'write', db, sql, params: [], callKey: nextKey() });
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    const rows = (n: number) =>
      write(
        `INSERT INTO t(v) SELECT printf('%.2000c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${n}) SELECT i FROM n)`,
      );
    await rows(900);
    const smaller = Date.now();
    pastMs(smaller);
    await rows(300);
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    // The database shrinks below its snapshot: restored, within the generation, to before the
    // last insert (a commit that says a smaller size).
    expect((await pool.run({ op: 'restore', db, at: smaller, by, timeoutMs: 60_000 })).ok).toBe(true);
    expect(listGenerations(localSource(dataDir, db.id)).at(-1)!.name).toBe(gen.name);
    const at = Date.now();
    pastMs(at);
    const small = dumpHash(db.path, { withoutAudit: true });
    const live = new Database(db.path, { readonly: true });
    expect(live.pragma('page_count', { simple: true }) as number).toBeLessThan(gen.snapshot!.pages * 0.8);
    live.close();
    const fork = historyTarget(dataDir, 'rot/shrunk-fork');
    expect((await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 })).ok).toBe(true);
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(small);
    // A byte rotting past what that moment kept is never read; one inside it is found.
    const file = gen.snapshotPath;
    const ns = fs.statSync(file, { bigint: true }).mtimeNs;
    const rot = (offset: number) => {
      const fd = fs.openSync(file, 'r+');
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, offset);
      b[0] = b[0]! ^ 0xff;
      fs.writeSync(fd, b, 0, 1, offset);
      fs.closeSync(fd);
      execFileSync('touch', ['-m', '-d', `@${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, '0')}`, file]);
    };
    rot(gen.snapshot!.bytes - 100);
    const past = historyTarget(dataDir, 'rot/shrunk-past');
    expect((await pool.run({ op: 'restoreInto', db: past, source: db.id, from: db, at, by, timeoutMs: 60_000 })).ok).toBe(true);
    expect(dumpHash(past.path, { withoutAudit: true })).toBe(small);
    rot(100 * 4096 + 100);
    const inside = historyTarget(dataDir, 'rot/shrunk-inside');
    const out = await pool.run({ op: 'restoreInto', db: inside, source: db.id, from: db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code).toBe('HISTORY_CORRUPT');
    expect((out as { error: { detail: string } }).error.detail).toContain(`snapshot ${gen.name} is damaged`);
    expect(fs.existsSync(inside.path)).toBe(false);
  }, 60_000);
});
