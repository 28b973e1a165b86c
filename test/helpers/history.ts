import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';

/**
 * A logical dump of a SQLite file as a sha256: every table's schema and rows in rowid (or
 * primary-key) order, agentdb's own tables included, values typed (an integer 1 and a real 1.0
 * differ). Two files with the same dump hold the same data.
 */
export function dumpHash(file: string, opts: DumpOptions = {}): string {
  // Not read-only: a WAL-mode file opened read-only needs its -shm already there.
  const db = new Database(file, { fileMustExist: true });
  try {
    return dumpOf(db, opts);
  } finally {
    db.close();
  }
}

const BLOB_SUM = 'agentdb_test_blob_sha1';

/** `withoutAudit`: leave out `_agentdb_audit` and `_agentdb_activity`, which keep the record of restores and their undos (and carry what a restore undid). */
export interface DumpOptions {
  withoutAudit?: boolean;
}

/** The same dump of an open handle. */
export function dumpOf(db: Database.Database, opts: DumpOptions = {}): string {
  db.function(BLOB_SUM, { deterministic: true }, (b: unknown) =>
    createHash('sha1')
      .update(b as Buffer)
      .digest('hex'),
  );
  const hash = createHash('sha256');
  const objects = db.prepare("SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all() as {
    type: string;
    name: string;
    sql: string | null;
  }[];
  for (const o of objects) {
    if (opts.withoutAudit && (o.name.startsWith('_agentdb_audit') || o.name.startsWith('_agentdb_activity'))) continue;
    hash.update(`${o.type}|${o.name}|${o.sql}\n`);
    if (o.type !== 'table') continue;
    const withoutRowid = /WITHOUT\s+ROWID\s*$/i.test(o.sql ?? '');
    const quoted = `"${o.name.replaceAll('"', '""')}"`;
    // A blob as its sha1 (hashed in JavaScript, registered below), not quote()'s hex: hex-quoting
    // a few megabytes of blobs made each dump take a quarter of a second. The sha1 carries an X
    // and no quotes, which no quote() output has.
    const columns = (db.prepare(`SELECT name FROM pragma_table_info(?)`).pluck().all(o.name) as string[]).map((c) => {
      const col = `"${c.replaceAll('"', '""')}"`;
      return `(CASE WHEN typeof(${col}) = 'blob' THEN 'X' || ${BLOB_SUM}(${col}) ELSE quote(${col}) END)`;
    });
    // Rows as SQLite's own quote() of each value (an integer 1 and a real 1.0 differ), built in
    // SQLite: thousands of dumps must not each walk every row in JavaScript.
    const text = db
      .prepare(`SELECT group_concat(${columns.join(" || ',' || ")}, char(10)) FROM (SELECT * FROM ${quoted} ORDER BY ${withoutRowid ? '1' : 'rowid'})`)
      .pluck()
      .get() as string | null;
    hash.update(text ?? '');
    hash.update('\n');
  }
  return hash.digest('hex');
}

/** PRAGMA integrity_check's first line. */
export function integrity(file: string): string {
  const db = new Database(file, { fileMustExist: true });
  try {
    return (db.pragma('integrity_check') as { integrity_check: string }[])[0]!.integrity_check;
  } finally {
    db.close();
  }
}

/** Waits until the clock has moved past `ms`, so the next commit's time is later than it. */
export function pastMs(ms: number): void {
  while (Date.now() <= ms) {
    /* at most a millisecond */
  }
}

/** The statements of the RESTORE rows in a database's audit table, oldest first. */
export function auditStatements(file: string): string[] {
  const db = new Database(file, { fileMustExist: true });
  try {
    return (db.prepare("SELECT statement FROM _agentdb_audit WHERE tool = 'RESTORE' ORDER BY at").all() as { statement: string }[]).map((r) => r.statement);
  } finally {
    db.close();
  }
}

/** A small deterministic generator (mulberry32) for randomized tests: a failing seed repeats. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
