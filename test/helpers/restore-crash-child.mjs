/**
 * A process that restores one database in place (or forks it), as an executor child would, and kills itself
 * (SIGKILL: no cleanup, no `finally`) right after the named step of the restore — what a crash
 * or a power cut there leaves behind. Run as
 * `node restore-crash-child.mjs '{"dataDir", "db": DbTarget, "at", "step", "into"?: DbTarget}'`
 * (with `into`, a fork of `db` into it).
 *
 * Plain JavaScript on the build (test/global-setup.ts makes it current), as the executor child it
 * stands for: under tsx each start took 0.25-0.45 s of CPU compiling src/, against ~0.1 here.
 */
import { HistoryCapture } from '../../dist/src/history/handle-capture.js';
import { restoreInto } from '../../dist/src/history/restore-into.js';
import { restoreInPlace } from '../../dist/src/history/restore-requests.js';
import { HandleCache } from '../../dist/src/sqlite/handle-cache.js';

const { dataDir, db, at, step, into } = JSON.parse(process.argv[2]);
const history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
const handles = new HandleCache({ size: 4, ...history.hooks() });
const by = { who: 'operator:crash', via: 'operator' };
const hooks = {
  step(name) {
    if (name === step) process.kill(process.pid, 'SIGKILL');
  },
};
if (into) restoreInto(handles, history, dataDir, { op: 'restoreInto', db: into, source: db.id, at, by }, hooks);
else restoreInPlace(handles, history, dataDir, { op: 'restore', db, at, by }, hooks);
// Past the last step: the restore finished, which a crash test did not ask for.
process.exit(3);
