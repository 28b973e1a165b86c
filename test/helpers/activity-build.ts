import Database from 'better-sqlite3';
import { capture } from '../../src/history/capture.ts';
import { localSource } from '../../src/history/history-files.ts';
import { recordCallActivity } from '../../src/sqlite/sqlite-activity.ts';

/**
 * A database of `commits` calls at `file`, each its activity row in its commit, captured as the
 * executor captures (fast: no queue, no worker). Answers it open; the caller closes it.
 */
export function buildActivity(dataDir: string, file: string, commits: number, id: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  const opts = { source: localSource(dataDir, id), checkpointBytes: 4 * 1024 * 1024 };
  capture(db, file, opts);
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  const call = db.transaction((i: number) => {
    insert.run(`row ${i}`);
    recordCallActivity(db, { tool: 'DATA_WRITE_SQL', by: 'agent:bench', callId: `c${i}`, statement: 'INSERT INTO t (v) VALUES (?)' }, 1);
  });
  for (let i = 0; i < commits; i++) {
    call(i);
    capture(db, file, opts);
  }
  return db;
}
