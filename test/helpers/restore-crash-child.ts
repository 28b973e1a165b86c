/**
 * A process that restores one database in place (or forks it), as an executor child would, and kills itself
 * (SIGKILL: no cleanup, no `finally`) right after the named step of the restore — what a crash
 * or a power cut there leaves behind. Run as
 * `node --import tsx restore-crash-child.ts '{"dataDir", "db": DbTarget, "at", "step", "into"?: DbTarget}'`
 * (with `into`, a fork of `db` into it).
 */
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { restoreInPlace, type RestoreStep } from '../../src/history/restore-requests.ts';
import { restoreInto } from '../../src/history/restore-into.ts';

const { dataDir, db, at, step, into } = JSON.parse(process.argv[2]!) as { dataDir: string; db: DbTarget; at: number; step: RestoreStep; into?: DbTarget };
const history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
const handles = new HandleCache({ size: 4, ...history.hooks() });
const by = { who: 'operator:crash', via: 'operator' as const };
const hooks = {
  step(name: RestoreStep) {
    if (name === step) process.kill(process.pid, 'SIGKILL');
  },
};
if (into) restoreInto(handles, history, dataDir, { op: 'restoreInto', db: into, source: db.id, at, by }, hooks);
else restoreInPlace(handles, history, dataDir, { op: 'restore', db, at, by }, hooks);
// Past the last step: the restore finished, which a crash test did not ask for.
process.exit(3);
