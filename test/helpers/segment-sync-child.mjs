/**
 * A process that writes one database with history capture on, as an executor child does: a
 * capture after every commit, checkpoints every 64 KiB of WAL, and the copy before its last
 * close. Run under strace by history-segment-sync.test.ts, which reads the order of its fsyncs.
 * `node segment-sync-child.mjs '{"dir", "commits", "restoreTo"?}'`; with `restoreTo` it then
 * begins a new generation from the file, as a restore does.
 *
 * Plain JavaScript on the build (test/global-setup.ts makes it current), as the executor child it stands for.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { capture, forgetCapture } from '../../dist/src/history/capture.js';
import { captureBeforeClose, sealAfterClose } from '../../dist/src/history/capture-on-close.js';
import { localSource } from '../../dist/src/history/history-files.js';
import { startGeneration } from '../../dist/src/history/snapshot.js';

const { dir, commits, regenerate } = JSON.parse(process.argv[2]);
const file = path.join(dir, 'db.sqlite');
const source = localSource(dir, 'sync/a');
const opts = { source, checkpointBytes: 64 * 1024 };
const db = new Database(file);
db.pragma('journal_mode = WAL');
db.pragma('wal_autocheckpoint = 0');
db.pragma('synchronous = NORMAL');
capture(db, file, opts);
db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)');
capture(db, file, opts);
const insert = db.prepare('INSERT INTO t (b) VALUES (randomblob(8192))');
for (let i = 0; i < commits; i++) {
  insert.run();
  capture(db, file, opts);
}
if (regenerate) {
  // Rows the capture has not copied yet stay in the WAL; a new generation's checkpoint folds them.
  insert.run();
  capture(db, file, opts);
  startGeneration(db, file, source, 'restore', Date.now());
  forgetCapture(file);
  db.close();
} else {
  const pending = captureBeforeClose(db, file, opts);
  db.close();
  sealAfterClose(file, pending);
}
process.stdout.write('done\n');
