import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { capture, capturedPosition } from '../../src/history/capture.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { sweepKeptDescriptors } from '../../src/history/kept-descriptors.ts';
import { restoreInPlace } from '../../src/history/restore-requests.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { pastMs } from '../helpers/history.ts';
import { historyTarget } from '../helpers/history-pool.ts';

// Session 31, F7. Closing any descriptor of a file lets go every POSIX lock the process holds on
// it, SQLite's own among them (sqlite.org/howtocorrupt.html, 2.2). Session 30 closed the -shm
// case (history-shm-locks.test.ts); this is the database file's: the executor child opened and
// closed the live file itself to copy a generation's snapshot (and a restore to read its header
// and pages), and its connection, which SQLite believes holds SHARED for its life, then held
// none. SQLite's own check of the -shm (`unixIsSharingShmNode`) keeps an ordinary connection
// elsewhere from taking itself for the last one at its close; a connection that takes the file
// whole (`locking_mode = EXCLUSIVE`, an operator's sqlite3 shell) does not look there: it got
// EXCLUSIVE beside the child's open connection, read the WAL into its own index, and at its
// close checkpointed and DELETED the WAL under the child. The child's next commits went into
// the deleted file: answered ok, unreadable by any other process (SQLITE_IOERR_SHORT_READ: the
// -shm says frames a new WAL lacks), in no history, gone with the child on a kill.

const dirs: string[] = [];
const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
  sweepKeptDescriptors();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const BETTER_SQLITE3 = JSON.stringify(require.resolve('better-sqlite3'));

/** Runs `body` (with `db` open on `file`) in another process; what it prints, or the SQLite code it failed with. */
function elsewhere(file: string, body: string): string {
  // No busy wait: a lock refused answers SQLITE_BUSY at once.
  const script = `const D = require(${BETTER_SQLITE3}); const db = new D(${JSON.stringify(file)}, { timeout: 0 }); try { ${body} } catch (e) { process.stdout.write(String(e.code)); } db.close();`;
  return execFileSync(process.execPath, ['-e', script]).toString();
}

/** A connection of another process that takes the file whole, reads, and closes. */
const exclusiveElsewhere = (file: string) =>
  elsewhere(file, "db.pragma('locking_mode = EXCLUSIVE'); process.stdout.write(String(db.prepare('SELECT count(*) AS n FROM t').get().n));");
/** Rows of `t` as a connection of another process reads them. */
const rowsElsewhere = (file: string) => elsewhere(file, "process.stdout.write(String(db.prepare('SELECT count(*) AS n FROM t').get().n));");

/** A database in WAL mode, as the executor child's handle cache opens one, with its table. */
function liveDatabase(name: string): { dir: string; file: string; db: Database.Database } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-db-locks-'));
  dirs.push(dir);
  const file = path.join(dir, 'shards', '0', 'w', `${name}.sqlite`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  open.push(db);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (x)');
  return { dir, file, db };
}

it("keeps SQLite's lock on the database file through a first capture's snapshot: another process cannot take the file whole, and sees every commit", () => {
  const { dir, file, db } = liveDatabase('a');
  db.prepare('INSERT INTO t VALUES (1)').run();
  // The database's first capture begins its first generation from a copy of the file.
  const source = localSource(dir, 'w/a');
  capture(db, file, { source, checkpointBytes: 1 << 20 });
  expect(listGenerations(source)).toHaveLength(1);

  expect(exclusiveElsewhere(file)).toBe('SQLITE_BUSY');
  expect(fs.existsSync(`${file}-wal`)).toBe(true);
  db.prepare('INSERT INTO t VALUES (2)').run();
  expect(rowsElsewhere(file)).toBe('2');
});

it("keeps it through a large snapshot's copy and its hash on the other thread (a worker thread's close is the process's)", () => {
  const { dir, file, db } = liveDatabase('big');
  // Past 16 MiB, the snapshot's sha256 is computed on the hashing thread while this one copies.
  db.prepare('INSERT INTO t VALUES (zeroblob(17 * 1024 * 1024))').run();
  const source = localSource(dir, 'w/big');
  capture(db, file, { source, checkpointBytes: 64 << 20 });
  expect(listGenerations(source)[0]!.snapshot!.bytes).toBeGreaterThan(16 * 1024 * 1024);

  expect(exclusiveElsewhere(file)).toBe('SQLITE_BUSY');
  db.prepare('INSERT INTO t VALUES (2)').run();
  expect(rowsElsewhere(file)).toBe('2');
});

it('keeps it through a restore in place within the generation, which compares the live file with history', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-db-locks-'));
  dirs.push(dataDir);
  // Checkpointed after every copy: the live file holds every page, and is compared with history byte for byte.
  const history = new HistoryCapture(dataDir, { checkpointBytes: 1, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  const target = historyTarget(dataDir, 'w/r');
  try {
    const write = (sql: string) => {
      const db = handles.open(target, 'write');
      db.exec(sql);
      history.run(db, target);
    };
    // Pages enough in the first snapshot that the restore's few are under a sixteenth of them: it
    // compares those and the rest's checksums with history instead of checking the structure.
    fs.mkdirSync(path.dirname(target.path), { recursive: true });
    const before = new Database(target.path);
    before.pragma('journal_mode = WAL');
    before.exec('CREATE TABLE t (x); CREATE TABLE filler (b)');
    before
      .prepare(
        'INSERT INTO filler SELECT randomblob(3000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i FROM n)',
      )
      .run();
    before.close();
    write('INSERT INTO t VALUES (1)');
    const at = Date.now();
    pastMs(at);
    write('INSERT INTO t VALUES (2)');
    restoreInPlace(handles, history, dataDir, { op: 'restore', db: target, at, by: { who: 'operator:test', via: 'operator' } });
    // Within the generation (one commit; no generation begun), and its handle left open, having
    // read the live file to vouch for it (`liveIsHistory`).
    expect(listGenerations(localSource(dataDir, 'w/r'))).toHaveLength(1);
    expect(handles.isOpen(target.path)).toBe(true);

    expect(exclusiveElsewhere(target.path)).toBe('SQLITE_BUSY');
    write('INSERT INTO t VALUES (3)');
    expect(rowsElsewhere(target.path)).toBe('2');
  } finally {
    handles.closeAll();
  }
});

it('says so when the WAL was deleted under its connection: the copy fails loudly, keeps the commit, and folds nothing into the file', () => {
  const { dir, file, db } = liveDatabase('gone');
  const source = localSource(dir, 'w/gone');
  // Checkpointed after every copy, as far as capture is concerned.
  const opts = { source, checkpointBytes: 1 };
  db.prepare('INSERT INTO t VALUES (1)').run();
  capture(db, file, opts);
  db.prepare('INSERT INTO t VALUES (2)').run();
  capture(db, file, opts);
  const before = capturedPosition(file, source)!;
  const fileBytes = fs.statSync(file).size;
  // What another process's close did when it took itself for the last connection.
  fs.rmSync(`${file}-wal`);
  db.prepare('INSERT INTO t VALUES (3)').run();
  expect(() => capture(db, file, opts)).toThrow(/WAL of .* was deleted while this connection had it open/);
  // History holds the commit no other process can see; the file was not checkpointed into.
  const after = capturedPosition(file, source)!;
  expect(after.generation).toBe(before.generation);
  expect(after).not.toEqual(before);
  expect(fs.statSync(file).size).toBe(fileBytes);
});

it('holds the handle of a connection whose WAL was deleted under it open at its close: the close would fold that WAL into the file', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-db-locks-'));
  dirs.push(dataDir);
  const history = new HistoryCapture(dataDir, { checkpointBytes: 1 << 20, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  const target = historyTarget(dataDir, 'w/held');
  const db = handles.open(target, 'write');
  try {
    db.exec('CREATE TABLE t (x)');
    history.run(db, target);
    db.exec('INSERT INTO t VALUES (1)');
    history.run(db, target);
    expect(history.behindCause(target.path)).toBeUndefined();
    fs.rmSync(`${target.path}-wal`);
    db.exec('INSERT INTO t VALUES (2)');
    history.run(db, target);
    // Logged as a failed copy, the database counted behind (the capture-lag gauge), and not closed.
    expect(history.behindCause(target.path)).toMatch(/failed since/);
    handles.closeAll();
    expect(handles.heldOpen).toBe(1);
    expect(db.open).toBe(true);
  } finally {
    db.close();
  }
});
