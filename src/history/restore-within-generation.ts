import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { AgentDbError } from '../errors.ts';
import { capturedPosition } from './capture.ts';
import { liveMatches, planDelta, type Delta } from './delta-restore.ts';
import { takeBackDeltaWal, writeDeltaWal } from './delta-wal.ts';
import {
  listGenerations,
  readJson,
  undoPath,
  writeJsonAtomic,
  type GenerationInfo,
  type HistoryPosition,
  type HistorySource,
  type UndoPoint,
} from './history-files.ts';
import { liveIsHistory } from './live-history.ts';
import { planRestore, type RestorePlan } from './restore-plan.ts';
import { mapped, structureCheck } from './integrity.ts';
import { sealHolds } from './seal.ts';
import { cutUncommittedTail } from './uncommitted-tail.ts';
import { diskIsFull } from '../sqlite/sqlite-errors.ts';
import type { DbTarget } from '../sqlite/db-target.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import type { HistoryCapture } from './handle-capture.ts';
import { audit, closedEverywhere, type CarriedActivity, type RestoreActor } from './restore-audit.ts';
import { withoutPending } from './interrupted-restores.ts';

/** A delta restore writes at most this share of the database's pages; past it copying the rebuilt file in is cheaper. */
const MAX_SHARE = 0.5;

/** What a restore in place hands to {@link restoreWithinGeneration}. */
export interface WithinGeneration {
  handles: HandleCache;
  history: HistoryCapture;
  db: DbTarget;
  by: RestoreActor;
  plan: RestorePlan;
  source: HistorySource;
  hdir: string;
  undoId: string;
  /** The undo point already exists (an interrupted attempt of the same request wrote it). */
  reuseUndo: boolean;
  restoredTo: number;
  audited: string;
  /** The live file's activity rows, carried into the restored state (see `audit`). */
  carried: CarriedActivity;
  now: number;
  key: string;
  step(name: 'closed' | 'undo' | 'written' | 'audited' | 'unmarked'): void;
}

/**
 * Restores in place by one commit of the pages changed since the moment (see
 * `history/delta-restore.ts`), when the moment is in the live generation or in one that every
 * generation since continues exactly (nightly and manual snapshots taken with everything
 * captured), few enough pages changed since, and, once the database is closed everywhere, the
 * file is exactly what history says. Returns false, having changed nothing, when any of that does not hold: the caller then
 * copies the rebuilt file in. The database is closed when it returns either way. Returns what
 * to add to the answer once the commit is in, a `note` when its audit row or its copy into
 * history failed after it (a full disk): the restore is in place, and the next one finishes it.
 */
export function restoreWithinGeneration(a: WithinGeneration): false | { note?: string } {
  const { handles, history, db, source } = a;
  const end = capturedPosition(db.path, source);
  if (!end) return false;
  const gens = listGenerations(source);
  const from = gens.findIndex((g) => g.name === a.plan.generation);
  if (from < 0) return false;
  const chain = gens.slice(from);
  const gen = chain.at(-1);
  if (!gen?.current || gen.end || !gen.snapshot || gen.name !== end.generation) return false;
  const livePages = Math.ceil((fs.statSync(db.path, { throwIfNoEntry: false })?.size ?? 0) / gen.snapshot.pageSize);
  let delta: Delta | undefined;
  try {
    delta = planDelta(a.plan, chain, end, Math.max(64, Math.floor(Math.max(livePages, gen.snapshot.pages) * MAX_SHARE)));
  } catch (err) {
    // A damaged frame after the moment only rules this way out: rebuilding reads none of them,
    // and says precisely what is damaged when it is a frame it needs.
    if (err instanceof AgentDbError && err.code === 'HISTORY_CORRUPT') return false;
    throw err;
  }
  if (!delta) return false;
  handles.evict(db.path);
  a.step('closed');
  if (!ready(db.path, source, gen.dir, end, delta)) return false;

  // The undo point, durable before the commit, says a restore is under way (`pending`) until
  // its audit row is in: a crash in between leaves the restored database without that row, and
  // the next restore of the database finishes the same request or records the row
  // (`settleInterrupted`).
  const salts = randomBytes(8);
  const pending = { key: a.key, salts: salts.toString('hex'), audited: a.audited, by: a.by };
  const known = a.reuseUndo ? readJson<UndoPoint>(undoPath(a.hdir, a.undoId)) : undefined;
  const point: UndoPoint = known ? withoutPending(known) : { id: a.undoId, database: db.id, createdAt: a.now, restoredTo: a.restoredTo, position: end };
  writeJsonAtomic(undoPath(a.hdir, a.undoId), { ...point, pending });
  a.step('undo');
  const written = writeDeltaWal(db.path, delta, salts);
  if (written === 'busy' || written === 'unlinkable') {
    // A connection opened the database since it was found closed (a program outside agentdb),
    // or links cannot be made here: nothing was written; the caller copies the pages in
    // through SQLite beside that connection, or renames a rebuilt file over.
    if (a.reuseUndo) writeJsonAtomic(undoPath(a.hdir, a.undoId), point);
    else fs.rmSync(undoPath(a.hdir, a.undoId), { force: true });
    return false;
  }
  a.step('written');
  // Opening recovers the commit from the WAL, and capture copies it like any other.
  let live: ReturnType<HandleCache['open']>;
  try {
    live = handles.open(db, 'write');
  } catch (err) {
    // This child's connection took the commit in, and its copy into history failed: in place.
    if (handles.isOpen(db.path)) return unfinished(err);
    // No connection took the commit in (on a full disk, the -shm could not grow for it): taken
    // back, the restore's failure says the truth; left, the next open with room recovers it and
    // a restore answered STORAGE_FULL is in place after all (session 33, F10).
    // Whether the disk is full is asked first: the take-back frees the WAL's room, and SQLite's
    // "disk I/O error" (SQLITE_IOERR_SHMSIZE) then answered INTERNAL (session 34, F11).
    const full = diskIsFull(db.path);
    if (takeBackDeltaWal(db.path, salts)) unpend(a, point);
    if (full && /^SQLITE_(IOERR|CANTOPEN)/.test(String((err as { code?: unknown }).code))) {
      throw new AgentDbError(
        'STORAGE_FULL',
        `${(err as Error).message} opening the database over the restore's commit (the disk is full): nothing was restored`,
      );
    }
    throw err;
  }
  // The file, as the restore leaves it (its commit is in the WAL beside it), compared whole with
  // history, from a snapshot that passed the structure check as it was made: the result is a
  // database SQLite committed, and is not checked again (see `live-history.ts`). Compared now,
  // not before the write: damage made in between passed a comparison made before (hostile review).
  const vouched = soundFrom(chain[0]!) && liveIsHistory(live, db.path, delta);
  // Otherwise every page not written comes from the live file as found, which nothing but this
  // check vouches for: the seal is written by the close inside this restore, so damage made
  // while the database was open (a disk, a program outside agentdb) passes it (hostile review).
  const problem = vouched ? undefined : integrityProblem(live);
  if (problem) {
    goBack(handles, db, source, end);
    if (a.reuseUndo) writeJsonAtomic(undoPath(a.hdir, a.undoId), point);
    else fs.rmSync(undoPath(a.hdir, a.undoId), { force: true });
    // The live file is damaged where the restore did not write: the caller rebuilds the moment
    // from history alone, which never reads it.
    return false;
  }
  try {
    audit(live, a.by, a.undoId, a.audited, a.now, a.carried);
    history.run(live, db);
  } catch (err) {
    // The audit's own failed commit must not come back later (`cutUncommittedTail`); the
    // restore's commit before it stays: every connection reads it now.
    cutUncommittedTail(live, db.path);
    return unfinished(err);
  }
  a.step('audited');
  // Where its own commits end: its undo discards only those made after. Not synced: a crash
  // losing it leaves `pending`, which the next restore clears (the audit row is in).
  const after = capturedPosition(db.path, source);
  try {
    writeJsonAtomic(undoPath(a.hdir, a.undoId), { ...point, ...(after ? { restoreEnd: after } : {}) }, { sync: false });
  } catch (err) {
    // Restored and audited: this write failing on a full disk is the crash above (the next
    // restore settles the pending point), not STORAGE_FULL "nothing was written" (session 34, F11).
    return {
      note: `restored; its undo point could not be finished (${err instanceof Error ? err.message : String(err)}): the next restore of this database does it`,
    };
  }
  a.step('unmarked');
  return {};
}

/**
 * A restore whose commit is in place but whose audit row or copy into history failed after it:
 * answered as done, since it is (a failure here was a restore answered STORAGE_FULL that every
 * reader saw: session 33, F10). Its undo point stays pending: the next restore of the database
 * records its audit row (`settleInterrupted`), and capture copies its commit once there is room.
 */
function unfinished(err: unknown): { note: string } {
  const why = err instanceof Error ? err.message : String(err);
  return { note: `restored; its audit row or its copy into history could not be written (${why}): the next restore of this database records the row` };
}

/** The undo point of a restore that wrote nothing, as it was before (or none, when this run made it). */
function unpend(a: WithinGeneration, point: UndoPoint): void {
  try {
    if (a.reuseUndo) writeJsonAtomic(undoPath(a.hdir, a.undoId), point);
    else fs.rmSync(undoPath(a.hdir, a.undoId), { force: true });
  } catch {
    // Left pending: its commit never landed, so the next restore settles it (`settleInterrupted`).
  }
}

/** Whether the closed database is exactly the state `delta` was planned against, and nothing else has it open. */
function ready(dbPath: string, source: HistorySource, genDir: string, end: HistoryPosition, delta: Delta): boolean {
  const now = capturedPosition(dbPath, source);
  return (
    now !== undefined &&
    now.generation === end.generation &&
    now.segment === end.segment &&
    now.frames === end.frames &&
    closedEverywhere(dbPath) &&
    sealHolds(genDir, dbPath, end.segment, end.frames) &&
    liveMatches(dbPath, delta)
  );
}

/** The generation's snapshot passed the structure check when it was made. */
function soundFrom(gen: GenerationInfo): boolean {
  return gen.snapshot?.checked === true;
}

function integrityProblem(db: ReturnType<HandleCache['open']>): string | undefined {
  const before = db.pragma('mmap_size', { simple: true }) as number;
  mapped(db);
  let rows: string[];
  try {
    rows = structureCheck(db);
  } catch (err) {
    // SQLITE_CORRUPT partway: as much a finding as a row of them (the pages go back either way).
    return (err as Error).message;
  } finally {
    db.pragma(`mmap_size = ${before}`);
  }
  return rows[0] === 'ok' ? undefined : rows.slice(0, 3).join('; ');
}

/** Puts the database back at `end` by the same means (its restore commit is history now), or throws loudly. */
function goBack(handles: HandleCache, db: DbTarget, source: HistorySource, end: HistoryPosition): void {
  const now = capturedPosition(db.path, source);
  const gen = listGenerations(source).find((g) => g.name === end.generation);
  handles.evict(db.path);
  const back = now && gen && now.generation === gen.name ? planDelta(planRestore(source, { position: end }), [gen], now, Number.MAX_SAFE_INTEGER) : undefined;
  if (!back || !ready(db.path, source, gen!.dir, now!, back))
    throw new Error(`a failed restore of ${db.id} could not be put back; restore it --at a time before`);
  if (['busy', 'unlinkable'].includes(writeDeltaWal(db.path, back)))
    throw new Error(`a failed restore of ${db.id} could not be put back (the database was opened meanwhile); restore it --at a time before`);
  handles.open(db, 'write');
}
