import type { ActivityEntry } from './activity-view.ts';
import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { FULL_DISK_NOTE, skippedOnFullDisk } from './dry-run-disk.ts';
import { capturedPosition, forgetCapture } from './capture.ts';
import { commitPosition } from './commit-position.ts';
import {
  historyDir,
  listGenerations,
  listSegments,
  localSource,
  readJson,
  undoPath,
  writeJsonAtomic,
  type HistorySource,
  type UndoPoint,
} from './history-files.ts';
import { readCommits } from './segment-index.ts';
import { withReader } from './reader-markers.ts';
import { discardGeneration, everyPage, prepareGeneration, publishGeneration, type PreparedGeneration } from './linked-generation.ts';
import { planRestore, type RestorePlan, type RestoreTarget } from './restore-plan.ts';
import { rebuild } from './restore-rebuild.ts';
import { verifyIntegrity } from './integrity.ts';
import { markRestoreLeaving, unmarkRestoreLeaving } from './seal.ts';
import { syncDir, syncFile } from './snapshot.ts';
import { sharedNote } from '../contracts/database-id.ts';
import type { DbTarget } from '../sqlite/db-target.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import type { HistoryCapture } from './handle-capture.ts';
import { allActivity } from '../sqlite/sqlite-activity.ts';
import { auditInto, closedEverywhere, newUndoId, type RestoreActor } from './restore-audit.ts';
import { throughSqlite } from './restore-through-sqlite.ts';
import { restoreWithinGeneration, settleInterrupted, withoutPending } from './restore-within-generation.ts';

const DAY_MS = 24 * 3600 * 1000;

/** What a restore answers (the HTTP contract of `POST /v1/databases/:db/restore`). */
export interface RestoreResult {
  database: string;
  restoredTo: string;
  dryRun: boolean;
  snapshot: { id: string; at: string };
  frames: number;
  commits: number;
  undoId?: string;
  into?: string;
  /**
   * An undo only: the commits made after the restore it undoes, which the undo discards (the
   * undo goes back to exactly the state before that restore). Said by the dry run too.
   */
  discardsCommits?: number;
  /** A dry run `into` a name the restore itself would refuse: why (`DATABASE_EXISTS: …`). */
  refused?: string;
  /** A dry run on a full disk: planned from the history copied so far, writing nothing (`FULL_DISK_NOTE`). */
  note?: string;
  /** A dry run: the history position of the state it would restore (`RestorePlan.state`). */
  keeps?: string;
  /**
   * A dry run: the activity list's entries after that state, newest first — what the restore takes
   * away in place (those an earlier restore undid are gone already), or leaves out of a new
   * database — at most `RESTORE_PREVIEW_ENTRIES`, `more` when there are others.
   */
  after?: { entries: ActivityEntry[]; more: boolean; note?: string };
}

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
  by: RestoreActor;
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
export function restoreInPlace(handles: HandleCache, history: HistoryCapture, dataDir: string, req: RestoreReq, hooks: RestoreHooks = {}): RestoreResult {
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
    let target: RestoreTarget;
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
    } else {
      target = restoreTarget(source, req, history.opts.retentionDays);
    }
    const plan = planRestore(source, target);
    const summary = (extra: Partial<RestoreResult>): RestoreResult => result(req.db.id, plan, plan.restoredTo, req.dryRun === true, { ...discards, ...extra });
    if (req.dryRun) return summary(unopened || !marked ? { note: FULL_DISK_NOTE } : {});

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
    if (restoreWithinGeneration(within)) return summary({ undoId });

    const next = `${req.db.path}${NEXT_SUFFIX}${process.pid}.tmp`;
    let prepared: PreparedGeneration | undefined;
    try {
      const built = rebuild(plan, next, { flushAsWritten: true });
      // The audit row goes into the restored file, so the restore is one change.
      const audited_ = auditInto(next, req.by, undoId, audited, now, carried);
      step('rebuilt');
      checkAndSync(next, built.sound);
      prepared = prepareGeneration(source, plan, next, audited_ ? new Set([...built.written, ...audited_]) : everyPage(next, plan.snapshot.pageSize));
      step('copied');
      // Closing captures what is left and, as the last connection, checkpoints and removes the
      // -wal and -shm (see `HistoryCapture.hooks`): the file alone is the state before.
      handles.evict(req.db.path);
      step('closed');
      const before = capturedPosition(req.db.path, source);
      if (!before) throw new AgentDbError('INTERNAL', `${req.db.id} has no captured history to keep an undo point in`);
      const point: UndoPoint = { id: undoId, database: req.db.id, createdAt: now, restoredTo: plan.restoredTo, position: before };
      if (!closedEverywhere(req.db.path)) {
        discardGeneration(prepared);
        prepared = undefined;
        throughSqlite(handles, history, req, next, point, hdir, source, reused !== undefined);
        if (reused) finishedUnder(hdir, undoId);
        return summary({ undoId });
      }
      if (!reused) writeJsonAtomic(undoPath(hdir, undoId), point);
      step('undo');
      const leaving = path.join(source.generationsDir, before.generation);
      markRestoreLeaving(leaving);
      step('marked');
      fs.renameSync(next, req.db.path);
      syncDir(path.dirname(req.db.path));
      step('renamed');
      // From here the database is the restored one. Should the generation fail to begin, the
      // mark stays and the next capture snapshots the file (a gap): history stays right.
      forgetCapture(req.db.path);
      publishGeneration(prepared, req.db.path, 'restore', Date.now());
      prepared = undefined;
      forgetCapture(req.db.path);
      step('generation');
      unmarkRestoreLeaving(leaving);
      if (reused) finishedUnder(hdir, undoId);
      step('unmarked');
      return summary({ undoId });
    } finally {
      discardGeneration(prepared);
      fs.rmSync(next, { force: true });
    }
  });
}

/** An interrupted restore asked again and finished under its undo id: its undo point is no longer pending. */
function finishedUnder(hdir: string, undoId: string): void {
  const point = readJson<UndoPoint>(undoPath(hdir, undoId));
  if (point) writeJsonAtomic(undoPath(hdir, undoId), withoutPending(point));
}

/** The name of the restored copy beside the live file, before it is renamed over it: `<db>.restore-<pid>.tmp`. */
export const NEXT_SUFFIX = '.restore-';

/** Removes what a restore of this database that crashed left: its rebuilt file and its copy. */
export function removeLeftovers(hdir: string, dbPath: string): void {
  const rm = (dir: string, match: (name: string) => boolean) => {
    let names: string[] = [];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) if (match(name)) fs.rmSync(path.join(dir, name), { force: true });
  };
  rm(hdir, (n) => /^restore-\d+-\d+\.sqlite(-wal|-shm)?$/.test(n));
  const base = path.basename(dbPath) + NEXT_SUFFIX;
  rm(path.dirname(dbPath), (n) => n.startsWith(base) && /\.tmp(-wal|-shm)?$/.test(n));
}

/**
 * The restored file checked (`PRAGMA quick_check`, removed when it fails) and synced before
 * anything takes it for a database; not checked when `sound` (see `Rebuilt.sound`).
 */
export function checkAndSync(file: string, sound: boolean): void {
  if (!sound) verifyIntegrity(file);
  syncFile(file);
}

/** The moment asked for, checked against the window: not in the future, not past the retention. */
/** Where a restore to a moment or `through` a position goes (one of the two is set; an undo is handled apart). */
export function restoreTarget(source: HistorySource, req: { at?: number; through?: string }, retentionDays: number): RestoreTarget {
  return req.through !== undefined ? { position: commitPosition(source, req.through) } : { at: checkedMoment(req.at, retentionDays) };
}

export function checkedMoment(at: number | undefined, retentionDays: number): number {
  if (at === undefined || !Number.isFinite(at)) throw new AgentDbError('INVALID_ARGUMENTS', 'a restore needs a time (--at) or an undo id (--undo)');
  const now = Date.now();
  if (at > now) throw new AgentDbError('HISTORY_OUT_OF_RANGE', `${new Date(at).toISOString()} is in the future`);
  if (at < now - retentionDays * DAY_MS) {
    throw new AgentDbError('HISTORY_OUT_OF_RANGE', `${new Date(at).toISOString()} is older than the ${retentionDays} days of history kept`);
  }
  return at;
}

export function result(database: string, plan: RestorePlan, restoredTo: number, dryRun: boolean, extra: Partial<RestoreResult>): RestoreResult {
  return {
    database,
    restoredTo: new Date(restoredTo).toISOString(),
    dryRun,
    snapshot: { id: plan.snapshot.id, at: new Date(plan.snapshot.at).toISOString() },
    frames: plan.frames,
    commits: plan.commits,
    ...(dryRun ? { keeps: plan.state } : {}),
    ...extra,
  };
}

/**
 * The commits made after the in-place restore `point` undoes: an undo of it discards them; it
 * says how many so nobody loses acknowledged writes unawares. A restore within the generation
 * recorded where its own commits ended (`restoreEnd`); one that copied a file in began a
 * generation, so the commits of the generations begun at or after it are the ones.
 */
function commitsAfterRestore(source: ReturnType<typeof localSource>, point: UndoPoint): number {
  const end = point.restoreEnd;
  let n = 0;
  for (const gen of listGenerations(source)) {
    if (end ? gen.name < end.generation : !gen.snapshot || gen.snapshot.at < point.createdAt) continue;
    for (const seg of listSegments(gen)) {
      // A generation's base commit is the restore that began it, not a commit made after one.
      const commits = readCommits(seg.indexPath, seg.closed).slice(gen.snapshot?.base?.segment === seg.name ? 1 : 0);
      if (!end || gen.name > end.generation || seg.name > end.segment) n += commits.length;
      else if (seg.name === end.segment) n += commits.filter((c) => c.frames > end.frames).length;
    }
  }
  return n;
}
