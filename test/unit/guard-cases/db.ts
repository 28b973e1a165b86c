import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { hardenConnection } from '../../../src/guard/engine-check.ts';

/** A marker planted where agents must never read: internal rows and the engine's schema text. */
export const SECRET = 'S3CR3T';

/**
 * The schema the engine tests run against: agent tables of every shape the bytecode check
 * must understand (AUTOINCREMENT, UNIQUE autoindex, foreign key with a cascade, a view, an
 * index), plus agentdb's internal table holding the secret, and a CHECK constraint whose text
 * (visible only through sqlite_schema) holds it too.
 */
export const SCHEMA = `
  CREATE TABLE t (a INTEGER PRIMARY KEY AUTOINCREMENT, b TEXT);
  CREATE TABLE u (x, y UNIQUE, note TEXT CHECK (note IS NULL OR note <> '${SECRET}-schema'));
  CREATE TABLE p (id INTEGER PRIMARY KEY);
  CREATE TABLE c (pid REFERENCES p(id) ON DELETE CASCADE);
  CREATE INDEX u_x ON u(x);
  CREATE VIEW tv AS SELECT a, b FROM t;
  CREATE TABLE _agentdb_calls (id TEXT PRIMARY KEY, result TEXT, ${SECRET.toLowerCase()}_col TEXT);
  INSERT INTO t (b) VALUES ('one'), ('two'), ('three');
  INSERT INTO u VALUES (1, 'a', NULL), (2, 'b', 'note');
  INSERT INTO p VALUES (1), (2);
  INSERT INTO c VALUES (1), (2);
  INSERT INTO _agentdb_calls VALUES ('call-1', '${SECRET}-row', '${SECRET}-col');
`;

/** A temp folder holding a populated, hardened database file; `close()` removes it all. */
export interface TempDb {
  dir: string;
  file: string;
  db: Database.Database;
  reopen(): Database.Database;
  close(): void;
}

/** Creates the database file in a fresh temp folder, in WAL mode as the store runs it. */
export function tempDb(): TempDb {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-guard-'));
  const file = path.join(dir, 'db.sqlite');
  const open = () => {
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    hardenConnection(db);
    return db;
  };
  const handle: TempDb = {
    dir,
    file,
    db: open(),
    reopen() {
      if (handle.db.open) handle.db.close();
      handle.db = open();
      return handle.db;
    },
    close() {
      if (handle.db.open) handle.db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  handle.db.exec(SCHEMA);
  return handle;
}
