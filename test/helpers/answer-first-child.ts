/**
 * A process that writes one row to a database as an executor child does when it answers first:
 * commit, take the write lock for the copy (`HistoryCapture.afterCommit`), answer (here: print
 * `answered` on stdout), then copy. `then` says what comes between the answer and the copy:
 * `kill` (SIGKILL, no cleanup), or `hold` for `holdMs` (a child slow to get to it). Run as
 * `node --import tsx answer-first-child.ts '{"dataDir", "db": DbTarget, "then", "holdMs"?, "sql"?, "uncopied"?}'`:
 * `sql` is the answered write (one transaction; by default one row into `t`), and `uncopied` a
 * commit made before it that nothing copies (as when a write's capture failed).
 */
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';

const { dataDir, db, then, holdMs, sql, uncopied } = JSON.parse(process.argv[2]!) as {
  dataDir: string;
  db: DbTarget;
  then: 'kill' | 'hold';
  holdMs?: number;
  sql?: string;
  uncopied?: string;
};
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
