import fs from 'node:fs';
import path from 'node:path';
import { sharedNote } from '../contracts/database-id.ts';
import { AgentDbError } from '../errors.ts';
import type { DbTarget } from '../sqlite/db-target.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import { allActivity } from '../sqlite/sqlite-activity.ts';
import { capturedPosition, forgetCapture } from './capture.ts';
import { FULL_DISK_NOTE, skippedOnFullDisk } from './dry-run-disk.ts';
import type { HistoryCapture } from './handle-capture.ts';
import { historyDir, localSource, readJson, undoPath, writeJsonAtomic, type UndoPoint } from './history-files.ts';
import { discardGeneration, everyPage, prepareGeneration, publishGeneration, type PreparedGeneration } from './linked-generation.ts';
import { withReader } from './reader-markers.ts';
import { auditInto, closedEverywhere, heldElsewhere, newUndoId, type RestoreActor } from './restore-audit.ts';
import { NEXT_SUFFIX, removeLeftovers } from './restore-leftovers.ts';
import { planRestore, type RestoreTarget } from './restore-plan.ts';
import { checkAndSync, rebuild } from './restore-rebuild.ts';
import { generationLater, result, type RestoreResult } from './restore-result.ts';
import { restoreTarget } from './restore-target.ts';
import { throughSqlite } from './restore-through-sqlite.ts';
import { commitsAfterRestore, finishedUnder } from './restore-undo.ts';
import { weighedPlan, weighing, type WeighedPlan, type WeighingResult } from './restore-weighed.ts';
import { settleInterrupted } from './interrupted-restores.ts';
import { restoreWithinGeneration } from './restore-within-generation.ts';
import { markRestoreLeaving, unmarkRestoreLeaving } from './seal.ts';
import { syncDir } from './file-sync.ts';
import { refuseBehind } from './behind-refusal.ts';

// The executor's restore and snapshot requests, and the restore in place; a restore into a new
// database is restore-into.ts. What a restore answers is restore-result.ts, where it goes
// restore-target.ts, what a crashed one left restore-leftovers.ts.

// The executor's requests this module serves (members of its `ExecRequest`), defined here, below
// the executor, which imports them.
/**
 * Restores the database in place to a moment (`at`, epoch ms) or back to an undo point, after
 * every statement received before it; keeps the state before as a new undo point.
 */
export interface RestoreInPlaceRequest {
  op: 'restore';
  db: DbTarget;
  at?: number;
  /** A history position instead of a time (see `commit-position.ts`): the state just after that commit. */
  through?: string;
  undo?: string;
  dryRun?: boolean;
  /** A dry run for the quota: answers the plan it weighs too (`WeighingResult.weighed`). */
  weighing?: boolean;
  /** The plan the quota weighed (`restore-weighed.ts`): run instead of planning again. */
  weighed?: WeighedPlan;
  by: RestoreActor;
}
/**
 * Creates `db` (which must not exist) from database `source`'s history at `at`; `from`, where
 * the source's file is, lets it first wait for a copy of the source's last answered write.
 */
export interface RestoreIntoRequest {
  op: 'restoreInto';
  db: DbTarget;
  source: string;
  from?: Pick<DbTarget, 'id' | 'path' | 'shard'>;
  at?: number;
  /** A history position instead of a time (see `commit-position.ts`). */
  through?: string;
  dryRun?: boolean;
  /** As {@link RestoreInPlaceRequest.weighing}. */
  weighing?: boolean;
  /** As {@link RestoreInPlaceRequest.weighed}. */
  weighed?: WeighedPlan;
  by: RestoreActor;
  /**
   * The shard op's job id: the new database's audit row is keyed by it, so a run of the same op
   * again (BullMQ runs a job again whose lock was lost after it had run) finds the database it
   * made and answers its restore, not DATABASE_EXISTS.
   */
  opId?: string;
}
/** Starts a new history generation from a fresh snapshot, if anything was committed since the last. */
export interface SnapshotRequest {
  op: 'snapshot';
  db: DbTarget;
  reason: 'nightly' | 'manual';
}

type RestoreReq = RestoreInPlaceRequest;

/** The steps of a restore in place, in order, as {@link RestoreHooks.step} names them. */
export type RestoreStep = 'rebuilt' | 'copied' | 'closed' | 'undo' | 'marked' | 'written' | 'audited' | 'renamed' | 'generation' | 'unmarked';

/** A test's view into a restore: called after each step (a crash test kills itself there). A fork has 'copied', 'renamed' and 'generation'. */
export interface RestoreHooks {
  step?(step: RestoreStep): void;
}

/**
 * Restores a database in place (see `agentdb restore`): history brought up to date, the target
 * planned, then one of two ways. Back within the live generation, with few enough pages changed
 * since, by one WAL commit of those pages as they were (`restoreWithinGeneration`; history goes
 * on in the generation). Otherwise the target is rebuilt beside the live file (the snapshot
 * copied, its chunks checked on another thread meanwhile, the frames applied), the restore
 * recorded in its audit, the file checked (`PRAGMA quick_check`) and synced, the live
 * database closed, the state before kept as an undo point, then the file renamed over the live
 * one and a new generation begun: the snapshot it was rebuilt from, linked, with what the
 * restore wrote as its base commit (`linked-generation.ts`; the old generation ends at the undo
 * point: the restore is no commit of it).
 *
 * The rename is the moment the database changes, whole: a crash before it leaves the database
 * as it was, one after it the restored one, and history right either way (the old generation is
 * marked as being left first, so capture sees a gap and snapshots whatever it then finds). No
 * connection may have the file open across the rename (its -wal and -shm would then belong to
 * two files): the pool closes the database in every executor child before a restore runs, this
 * child closes its own, and the -wal and -shm being gone after that close proves no other
 * connection, of any process, had it open. When one had (a program outside agentdb), the
 * rebuilt pages are copied in through SQLite's backup API instead, which is safe beside other
 * connections.
 */
export function restoreInPlace(handles: HandleCache, history: HistoryCapture, dataDir: string, req: RestoreReq, hooks: RestoreHooks = {}): WeighingResult {
  let live: ReturnType<HandleCache['open']> | undefined;
  // A closed database needs room for its -shm and -wal to open; a dry run goes on without.
  const unopened = skippedOnFullDisk(req.dryRun, req.db.path, () => (live = handles.open(req.db, 'read')));
  if (live ? handles.isPlaceholder(live) : !fs.existsSync(req.db.path))
    throw new AgentDbError('NOT_FOUND', `database ${req.db.id} does not exist (it was never written)${sharedNote(req.db.id)}`);
  if (live) history.run(live, req.db);
  const hdir = historyDir(dataDir, req.db.id);
  const source = localSource(dataDir, req.db.id);
  const what = req.undo ? `undo ${req.undo}` : req.through !== undefined ? `through ${req.through}` : `to ${new Date(req.at ?? 0).toISOString()}`;
  return withReader(hdir, what, { unmarkedOnFullDisk: req.dryRun === true }, (marked) => {
    let target: RestoreTarget | undefined;
    // An undo answers, like any restore, the last commit it keeps (`restoredTo`); its audit row
    // names the restore it undoes.
    let undone: UndoPoint | undefined;
    let discards: Partial<RestoreResult> = {};
    if (req.undo !== undefined) {
      const point = /^u[0-9a-z]+$/.test(req.undo) ? readJson<UndoPoint>(undoPath(hdir, req.undo)) : undefined;
      if (!point || point.database !== req.db.id) throw new AgentDbError('UNDO_NOT_FOUND', `${req.db.id} has no undo point ${JSON.stringify(req.undo)}`);
      target = { position: point.position };
      undone = point;
      discards = { discardsCommits: commitsAfterRestore(source, point) };
    } else if (!req.weighed) {
      target = restoreTarget(source, req, history.opts.retentionDays);
    }
    // Its pages now, as the byte quota weighs the restore (`restore-room.ts`): the file's own size
    // leaves out what still waits in the WAL for its checkpoint.
    const bytesBefore = live
      ? Number(live.pragma('page_count', { simple: true })) * Number(live.pragma('page_size', { simple: true }))
      : (fs.statSync(req.db.path, { throwIfNoEntry: false })?.size ?? 0);
    const planned = () => planRestore(source, target ?? restoreTarget(source, req, history.opts.retentionDays));
    const plan = req.weighed ? weighedPlan(req.weighed, bytesBefore, `restore of ${req.db.id} in place`, planned) : planned();
    const summary = (extra: Partial<RestoreResult>): RestoreResult =>
      result(req.db.id, plan, plan.restoredTo, req.dryRun === true, { ...discards, bytesBefore, ...extra });
    if (req.dryRun) {
      const dry = summary(unopened || !marked ? { note: FULL_DISK_NOTE } : {});
      return req.weighing ? { ...dry, weighed: weighing(plan, bytesBefore, dry.note !== undefined) } : dry;
    }

    // A moment past what history holds while its copies fail would take back, unsaid, writes
    // acknowledged before it (their commits wait in the WAL); its undo point would lack them too.
    if (req.at !== undefined && req.undo === undefined && req.through === undefined)
      refuseBehind(history, source, req.db, req.at, 'a restore in place to', 'nothing was restored or undone');
    // Only one restore of a database runs at a time (the reader marker): any file of the kinds
    // below is a crashed restore's.
    removeLeftovers(hdir, req.db.path);
    const step = (name: RestoreStep) => hooks.step?.(name);
    const key = JSON.stringify({ at: req.at ?? null, undo: req.undo ?? null, ...(req.through !== undefined ? { through: req.through } : {}), who: req.by.who });
    const { reuse: reused, finished } = settleInterrupted(handles, history, req.db, source, hdir, key);
    // The same request again after a crash that left its commit in place: it is done.
    if (finished) return summary({ undoId: finished });
    const undoId = reused ?? newUndoId();
    const audited = undone
      ? `undo ${undone.id} of the restore to ${new Date(undone.restoredTo).toISOString()} (back to the state of ${new Date(undone.createdAt).toISOString()}, before that restore)`
      : `restore to ${new Date(plan.restoredTo).toISOString()}`;
    const now = Date.now();
    // Read before anything is written: what agents did stays listed after the restore undoes it.
    const carried = allActivity(handles.open(req.db, 'read'));
    const within = {
      handles,
      history,
      db: req.db,
      by: req.by,
      plan,
      source,
      hdir,
      undoId,
      reuseUndo: reused !== undefined,
      restoredTo: plan.restoredTo,
      audited,
      carried,
      now,
      key,
      step,
    };
    const inPlace = restoreWithinGeneration(within);
    if (inPlace) return summary({ undoId, ...inPlace });

    const next = `${req.db.path}${NEXT_SUFFIX}${process.pid}.tmp`;
    let prepared: PreparedGeneration | undefined;
    try {
      const built = rebuild(plan, next, { flushAsWritten: true });
      // The audit row goes into the restored file, so the restore is one change.
      const audited_ = auditInto(next, req.by, undoId, audited, now, carried);
      step('rebuilt');
      checkAndSync(next, built.sound);
      // The way in is chosen before the copy into history a rename needs: a file another process
      // holds open goes in through the backup API, which begins its generation from the rebuilt
      // file itself. Prepared and then discarded, that copy (up to every page of the file) was
      // made beside the rebuilt file and the live WAL for nothing: a nearly full disk refused a
      // restore the backup path had room for (session 36, F15).
      const outside = heldElsewhere(req.db.path);
      if (!outside)
        prepared = prepareGeneration(source, plan, next, audited_ ? new Set([...built.written, ...audited_]) : everyPage(next, plan.snapshot.pageSize));
      step('copied');
      // Closing captures what is left and, as the last connection, checkpoints and removes the
      // -wal and -shm (see `HistoryCapture.hooks`): the file alone is the state before.
      handles.evict(req.db.path);
      step('closed');
      const before = capturedPosition(req.db.path, source);
      if (!before) throw new AgentDbError('INTERNAL', `${req.db.id} has no captured history to keep an undo point in`);
      const point: UndoPoint = { id: undoId, database: req.db.id, createdAt: now, restoredTo: plan.restoredTo, position: before };
      // Not prepared: held elsewhere before the close (held or not after it, the backup path is
      // safe). Asked again after it: a connection opened meanwhile, or one that has not read yet
      // (no -wal or -shm of its own), would go on with the old file's inode after a rename.
      if (!prepared || !closedEverywhere(req.db.path) || heldElsewhere(req.db.path)) {
        discardGeneration(prepared);
        prepared = undefined;
        const later = throughSqlite(handles, history, req, next, point, hdir, source, reused !== undefined);
        if (reused) finishedUnder(hdir, undoId);
        return summary({ undoId, ...(later ? { note: later } : {}) });
      }
      if (!reused) writeJsonAtomic(undoPath(hdir, undoId), point);
      step('undo');
      const leaving = path.join(source.generationsDir, before.generation);
      markRestoreLeaving(leaving);
      step('marked');
      fs.renameSync(next, req.db.path);
      syncDir(path.dirname(req.db.path));
      step('renamed');
      // From here the database is the restored one. Should the generation fail to begin (its
      // history's disk full), the mark stays and the next capture snapshots the file (a gap):
      // history stays right, and the restore is answered done, since it is. Thrown, a restore
      // in place was answered STORAGE_FULL with every write after its moment undone (F17).
      forgetCapture(req.db.path);
      let later: string | undefined;
      try {
        // `now`, its activity row's time: should retention prune every generation before this
        // one, its snapshot would otherwise take that row, and the restore would go unlisted.
        publishGeneration(prepared, req.db.path, 'restore', Date.now(), now);
        prepared = undefined;
      } catch (err) {
        later = generationLater(req.db.id, err);
      }
      forgetCapture(req.db.path);
      step('generation');
      if (!later) unmarkRestoreLeaving(leaving);
      if (reused) finishedUnder(hdir, undoId);
      step('unmarked');
      return summary({ undoId, ...(later ? { note: later } : {}) });
    } finally {
      discardGeneration(prepared);
      fs.rmSync(next, { force: true });
    }
  });
}
