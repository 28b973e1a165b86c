import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { closeWal } from '../../src/history/capture-connection.ts';
import { copyWithSha256 } from '../../src/history/snapshot.ts';
import { readWalIndex } from '../../src/history/wal-index.ts';
import { sweepKeptDescriptors } from '../../src/history/kept-descriptors.ts';

// Session 30 (F6's and G8's fault ledgers: restores that answered ok without acknowledged rows
// after a full disk). Closing any descriptor of a file lets go every POSIX lock the process holds
// on it, SQLite's own among them. A child closed its -shm descriptor after a copy failed, and the
// database file's after copying it into a snapshot: then another process's connection closing
// took itself for the last, checkpointed and deleted the WAL under the child's open connection,
// whose next commits went into the deleted WAL, seen by no other process.

const dirs: string[] = [];
const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
  sweepKeptDescriptors();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** Rows of `t` as a connection of another process reads them, opened and closed there. */
function rowsSeenElsewhere(file: string): number {
  const script = `const D = require(${JSON.stringify(require.resolve('better-sqlite3'))}); const db = new D(${JSON.stringify(file)}); process.stdout.write(String(db.prepare('SELECT count(*) AS n FROM t').get().n)); db.close();`;
  return Number(execFileSync(process.execPath, ['-e', script]).toString());
}

it("keeps SQLite's locks through a failed copy's close and a snapshot's copy: another process's close leaves the WAL, and sees every commit", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-shm-locks-'));
  dirs.push(dir);
  const file = path.join(dir, 'a.sqlite');
  const db = new Database(file);
  open.push(db);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (x)');
  db.prepare('INSERT INTO t VALUES (1)').run();

  // What capture does: reads the WAL index, then (a copy failed on a full disk) lets the WAL's
  // descriptors go; a generation begins with a snapshot copied from the file.
  expect(readWalIndex(db, file)?.lastFrame).toBeGreaterThan(0);
  closeWal(db);
  copyWithSha256(file, path.join(dir, 'snapshot.sqlite'));

  expect(rowsSeenElsewhere(file)).toBe(1);
  expect(fs.existsSync(`${file}-wal`)).toBe(true);
  db.prepare('INSERT INTO t VALUES (2)').run();
  expect(rowsSeenElsewhere(file)).toBe(2);
});

it('reads the WAL index of a database opened again through its new -shm, not the one its last connection deleted', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-shm-locks-'));
  dirs.push(dir);
  const file = path.join(dir, 'b.sqlite');
  const first = new Database(file);
  first.pragma('journal_mode = WAL');
  first.exec('CREATE TABLE t (x)');
  expect(readWalIndex(first, file)?.lastFrame).toBeGreaterThan(0);
  // Closed outside any handle cache (no sweep): the last connection deletes the WAL and -shm.
  first.close();
  expect(fs.existsSync(`${file}-shm`)).toBe(false);
  const again = new Database(file);
  open.push(again);
  again.pragma('wal_autocheckpoint = 0');
  for (let i = 0; i < 3; i++) again.prepare('INSERT INTO t VALUES (?)').run(i);
  // Three commits of a page each, in a WAL begun afresh: its index says so.
  expect(readWalIndex(again, file)?.lastFrame).toBe(3);
});
