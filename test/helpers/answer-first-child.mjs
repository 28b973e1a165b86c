/**
 * A process that writes one row to a database as an executor child does when it answers first:
 * commit, take the write lock for the copy (`HistoryCapture.afterCommit`), answer (here: print
 * `answered` on stdout), then copy. `then` says what comes between the answer and the copy:
 * `kill` (SIGKILL, no cleanup), or `hold` for `holdMs` (a child slow to get to it). Run as
 * `node answer-first-child.mjs '{"dataDir", "db": DbTarget, "then", "holdMs"?, "sql"?, "uncopied"?}'`:
 * `sql` is the answered write (one transaction; by default one row into `t`), and `uncopied` a
 * commit made before it that nothing copies (as when a write's capture failed).
 *
 * Plain JavaScript on the build (test/global-setup.ts makes it current), as the executor child it
 * stands for: under tsx each start took 0.25-0.45 s of CPU compiling src/, against ~0.1 here.
 */
import { HistoryCapture } from '../../dist/src/history/handle-capture.js';
import { HandleCache } from '../../dist/src/sqlite/handle-cache.js';

const { dataDir, db, then, holdMs, sql, uncopied } = JSON.parse(process.argv[2]);
const history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
const handles = new HandleCache({ size: 4, ...history.hooks() });
const live = handles.open(db, 'write');
if (uncopied) live.exec(uncopied);
live.transaction(() => live.exec(sql ?? "INSERT INTO t(v) VALUES ('answered first')"))();
history.afterCommit(live, db);
process.stdout.write('answered\n');
if (then === 'kill') process.kill(process.pid, 'SIGKILL');
setTimeout(() => {
  history.finishCommitted();
  handles.closeAll();
  process.stdout.write('copied\n');
}, holdMs ?? 0);
