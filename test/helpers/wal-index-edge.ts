import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'vitest';
import type { ExecOutcome } from '../../src/executor/executor-protocol.ts';

// The full-disk tests of a commit SQLite writes whole into the WAL but cannot enter in the WAL
// index (its -shm cannot grow: SQLITE_IOERR_SHMSIZE). Pages of 512 bytes put frame 4063, where
// the index needs its second 32 KiB, 2 MB into the WAL: a 16 MB tmpfs holds the lot.

/** A write of `sql` on the test's database, answered as the pool answers it. */
type Write = (sql: string) => Promise<ExecOutcome>;

/** Frames of 512-byte pages in the WAL of `dbPath`. */
export function walFrames(dbPath: string): number {
  return Math.max(0, ((fs.statSync(`${dbPath}-wal`, { throwIfNoEntry: false })?.size ?? 32) - 32) / (512 + 24));
}

/** Makes the database file `dbPath` (and its folder): pages of 512 bytes, WAL mode, `t (id, v)`. */
export function smallPageDatabase(dbPath: string): void {
  fs.mkdirSync(path.dirname(dbPath), { recursive: true });
  const made = new Database(dbPath);
  made.pragma('page_size = 512');
  made.pragma('journal_mode = WAL');
  made.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  made.close();
}

/** Writes 'filling' rows until the WAL holds 4056 frames, 7 short of the index's edge; each must answer ok. */
export async function fillToIndexEdge(write: Write, dbPath: string): Promise<void> {
  while (walFrames(dbPath) < 4056) {
    const out = await write("INSERT INTO t (v) VALUES ('filling')");
    expect(out.ok, JSON.stringify(out)).toBe(true);
  }
}

/**
 * Inserts `value(i)` for i up to 19 until one fails (the disk full), answering it and its
 * outcome; `acked` hears each value answered ok before it.
 */
export async function firstFailedWrite(
  write: Write,
  value: (i: number) => string,
  acked: (v: string) => void = () => undefined,
): Promise<{ v: string; out: ExecOutcome } | undefined> {
  for (let i = 0; i < 20; i++) {
    const v = value(i);
    const out = await write(`INSERT INTO t (v) VALUES ('${v}')`);
    if (!out.ok) return { v, out };
    acked(v);
  }
  return undefined;
}
