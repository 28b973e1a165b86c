import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { forgetCapture } from './capture.ts';
import { historyDir, localSource } from './history-files.ts';
import { withReader } from './reader-markers.ts';
import { discardGeneration, prepareGeneration, publishGeneration, type PreparedGeneration } from './linked-generation.ts';
import { planRestore } from './restore-plan.ts';
import { checkAndSync, rebuild } from './restore-rebuild.ts';
import { NEXT_SUFFIX, removeLeftovers } from './restore-leftovers.ts';
import type { RestoreHooks, RestoreIntoRequest as IntoReq } from './restore-requests.ts';
import { generationLater, result } from './restore-result.ts';
import { restoreTarget } from './restore-target.ts';
import { weighedPlan, weighing, type WeighingResult } from './restore-weighed.ts';
import { syncDir } from './file-sync.ts';
import type { HandleCache, HandleTarget } from '../sqlite/handle-cache.ts';
import type { HistoryCapture } from './handle-capture.ts';
import { audit, audited } from './restore-audit.ts';
import { FULL_DISK_NOTE, skippedOnFullDisk } from './dry-run-disk.ts';
import { refuseBehind } from './behind-refusal.ts';

/** Why a restore into `db` is refused for its name (DATABASE_EXISTS's detail), or undefined when the name is free. */
export function intoTaken(db: { id: string; path: string }): string | undefined {
  return fs.existsSync(db.path) ? `database ${db.id} already exists; restore into a new name` : undefined;
}

/**
 * Creates a new database from another one's history (`agentdb restore DB --at T --into NEW`).
 * Runs on the new database's line; reads the source's history files, which capture only
 * appends to.
 */
export function restoreInto(handles: HandleCache, history: HistoryCapture, dataDir: string, req: IntoReq, hooks: RestoreHooks = {}): WeighingResult {
  const exists = intoTaken(req.db);
  const auditId = `${req.db.id}:${req.opId ?? Date.now()}`;
  // This op made it, and runs again: its lock was lost after it had run (Redis restarted under
  // it), and BullMQ runs the job again. Its restore is done: answered again, not DATABASE_EXISTS
  // "nothing was changed" (session 30, F6: the fault ledger's `restore --into` so answered, its
  // database whole).
  const done = exists !== undefined && !req.dryRun && req.opId !== undefined && audited(handles.open(req.db, 'read'), auditId);
  // A dry run previews the moment anyway and says the restore itself would be refused, as
  // `--from-blob --dry-run` does.
  if (exists && !req.dryRun && !done) throw new AgentDbError('DATABASE_EXISTS', exists);
  const source = localSource(dataDir, req.source);
  if (!fs.existsSync(source.generationsDir))
    throw new AgentDbError('NOT_FOUND', `database ${req.source} has no history (it does not exist, or was never written)`);
  const from = req.from;
  // Opening a closed source needs room for its -shm and -wal; a dry run goes on without.
  const unsettled = from ? skippedOnFullDisk(req.dryRun, from.path, () => settle(handles, history, from)) : false;
  return withReader(historyDir(dataDir, req.source), `into ${req.db.id}`, { unmarkedOnFullDisk: req.dryRun === true }, (marked) => {
    // The plan the quota weighed, when it was (`restore-weighed.ts`): a fork adds the same whatever its source's size now.
    const planned = () => planRestore(source, restoreTarget(source, req, history.opts.retentionDays));
    const plan = req.weighed ? weighedPlan(req.weighed, undefined, `restore of ${req.source} into ${req.db.id}`, planned) : planned();
    if (req.dryRun) {
      const note = unsettled || !marked ? { note: FULL_DISK_NOTE } : {};
      const dry = result(req.source, plan, plan.restoredTo, true, { into: req.db.id, ...(exists ? { refused: `DATABASE_EXISTS: ${exists}` } : {}), ...note });
      return req.weighing ? { ...dry, weighed: weighing(plan, undefined, dry.note !== undefined) } : dry;
    }
    if (done) return result(req.source, plan, plan.restoredTo, false, { into: req.db.id });
    if (from && req.at !== undefined) refuseBehind(history, source, from, req.at, 'a restore to', 'nothing was restored');
    fs.mkdirSync(path.dirname(req.db.path), { recursive: true });
    const forkSource = localSource(dataDir, req.db.id);
    removeLeftovers(historyDir(dataDir, req.db.id), req.db.path);
    const next = `${req.db.path}${NEXT_SUFFIX}${process.pid}.tmp`;
    let prepared: PreparedGeneration | undefined;
    let later: string | undefined;
    try {
      const built = rebuild(plan, next, { flushAsWritten: true });
      checkAndSync(next, built.sound);
      // Its history's first generation: the source's snapshot linked, with what the restore
      // wrote on top of it (see `linked-generation.ts`).
      prepared = prepareGeneration(forkSource, plan, next, built.written);
      hooks.step?.('copied');
      // Begun by a restore (a fork), whatever the name held before.
      const reason = 'restore';
      // The database first, then its history: a crash in between leaves a database whose next
      // open snapshots it (as for any database without history), never history without one.
      // A link never replaces (a rename would): a database created under the name meanwhile,
      // past the check above, is left alone.
      try {
        fs.linkSync(next, req.db.path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST')
          throw new AgentDbError('DATABASE_EXISTS', `${req.db.id} was created while it was being restored into; nothing was changed`);
        throw err;
      }
      // The second name goes before the seal is written: removing a link moves the file's change time.
      fs.rmSync(next, { force: true });
      syncDir(path.dirname(req.db.path));
      hooks.step?.('renamed');
      // From here the database exists: a failure to begin its history (that disk full) is a note,
      // and its next open snapshots it. Thrown, the fork was answered STORAGE_FULL "nothing was
      // written" with the database made, and its resend DATABASE_EXISTS (session 37, F17).
      try {
        publishGeneration(prepared, req.db.path, reason, Date.now());
        prepared = undefined;
      } catch (err) {
        later = generationLater(req.db.id, err);
      }
      forgetCapture(req.db.path);
      hooks.step?.('generation');
    } finally {
      discardGeneration(prepared);
      fs.rmSync(next, { force: true });
    }
    // Opening it finds its history begun (sealed for this file): the audit row is its first commit.
    const db = handles.open(req.db, 'write');
    audit(db, req.by, auditId, `created from ${req.source} as of ${new Date(plan.restoredTo).toISOString()}`, Date.now());
    history.run(db, req.db);
    return result(req.source, plan, plan.restoredTo, false, { into: req.db.id, ...(later ? { note: later } : {}) });
  });
}

/**
 * Waits for a copy of the database's last answered write (another child may hold its write lock
 * for it: a write is answered before its copy) and copies what its WAL still holds, so its
 * history has every write answered before. Not kept open when it was not: it may be another
 * shard's, and this worker evicts only its own.
 */
function settle(handles: HandleCache, history: HistoryCapture, db: HandleTarget): void {
  if (!fs.existsSync(db.path)) return;
  const wasOpen = handles.isOpen(db.path);
  const live = handles.open(db, 'read');
  if (wasOpen) history.run(live, db);
  // Opened here, it was captured on opening; its close copies once more.
  else handles.evict(db.path);
}
