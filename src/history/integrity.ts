/**
 * SQLite's structure check (`PRAGMA quick_check`, see {@link structureCheck}) on a database file
 * nothing else writes: a restore's rebuilt file, or a snapshot as it is made. A snapshot that
 * passed it is marked (`SnapshotMeta.checked`), and a
 * restore built from such a snapshot, checked chunk by chunk against its checksums, plus frames
 * SQLite committed (each checked against the WAL checksums), is that database as SQLite left it
 * at that commit: checking it again read every page of it a second time, 50 ms per 100 MB here,
 * more than the copy itself (restores ran at 0.33× a plain copy of the file).
 */
import Database from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';

/** What is wrong with `file`: the structure check's first three findings, or why SQLite could not read it; undefined when it is sound. */
export function integrityProblem(file: string): { findings: string } | { unreadable: string } | undefined {
  // Not read-only: a file in WAL mode opened read-only needs its -shm already there. Nothing
  // here writes, and closing removes the -wal and -shm it made.
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { fileMustExist: true });
    mapped(db);
    const rows = structureCheck(db);
    return rows[0] === 'ok' ? undefined : { findings: rows.slice(0, 3).join('; ') };
  } catch (err) {
    return { unreadable: (err as Error).message };
  } finally {
    db?.close();
  }
}

/**
 * SQLite's check of a file's structure (`PRAGMA quick_check`: every page, b-tree and overflow
 * chain, the freelist, each page used once, NOT NULL), on `db`, a connection nothing else uses
 * meanwhile: its findings, `['ok']` when none. Not `integrity_check`, and CHECK constraints
 * ignored: both evaluate expressions an agent wrote — the hostile review made a database no
 * restore could verify with `CHECK (random() % 2 = 0)`, and stalled a shard's snapshots for
 * 47 s with a CHECK (or an index on an expression) that costs a second a row, paid again at
 * every check. What quick_check leaves out (index contents against their tables) is SQLite's
 * own logic, which the frames' and snapshots' checksums already hold to what it wrote.
 */
export function structureCheck(db: Database.Database): string[] {
  const was = db.pragma('ignore_check_constraints', { simple: true }) as number;
  db.pragma('ignore_check_constraints = ON');
  try {
    return (db.pragma('quick_check') as { quick_check: string }[]).map((r) => r.quick_check);
  } finally {
    // The live connection goes back to agents' writes, whose CHECKs hold.
    db.pragma(`ignore_check_constraints = ${was ? 'ON' : 'OFF'}`);
  }
}

/** @throws AgentDbError HISTORY_CORRUPT when SQLite finds the rebuilt file damaged. */
export function verifyIntegrity(file: string): void {
  const problem = integrityProblem(file);
  if (problem && 'unreadable' in problem) throw new AgentDbError('HISTORY_CORRUPT', `the restored database cannot be read: ${problem.unreadable}`);
  if (problem) throw new AgentDbError('HISTORY_CORRUPT', `the restored database fails PRAGMA quick_check: ${problem.findings}`);
}

/**
 * Lets SQLite read the file through a memory map: the check reads every page, and one
 * read(2) per page made it three times slower on 100 MB (45 ms against 13 here). Only for a
 * connection about to check a file nothing else writes meanwhile.
 */
export function mapped(db: Database.Database): void {
  db.pragma(`mmap_size = ${MAP_BYTES}`);
}

/** SQLite's own ceiling (SQLITE_MAX_MMAP_SIZE); pages past it are read as usual. */
const MAP_BYTES = 0x7fff0000;
