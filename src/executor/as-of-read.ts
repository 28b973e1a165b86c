import fs from 'node:fs';
import Database from 'better-sqlite3';
import { AgentDbError, codeOf } from '../errors.ts';
import { hardenConnection } from '../guard/engine-check.ts';
import { momentBytes, momentFile, sweepMoments } from '../history/as-of-cache.ts';
import { planAsOf, recordedAt } from '../history/as-of-moment.ts';
import type { RestorePlan } from '../history/restore-plan.ts';
import type { HistoryCapture } from '../history/handle-capture.ts';
import { localSource } from '../history/history-files.ts';
import { refuseBehind } from '../history/behind-refusal.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import { forgetStatements } from '../sqlite/statement-cache.ts';
import type { AsOfRead, DbTarget, ExecOutcome } from './executor-protocol.ts';

/** AS_OF_KEEP_MINUTES' default, for a child started without it. */
const DEFAULT_KEEP_MS = 15 * 60_000;
/** How often, at most, a child sweeps moments past their keep (on a read of the past). */
const SWEEP_EVERY_MS = 60_000;
let sweptAt = 0;
/**
 * How often a child holding connections to kept moments looks for files dropped under them (the
 * quota's `dropMoments` in the worker, another child's sweep): an unlinked file's disk comes back
 * only once closed, and until then it is counted against no workspace (review 19, H29).
 */
const CLOSE_DROPPED_EVERY_MS = 5_000;
let closer: NodeJS.Timeout | undefined;

/**
 * Runs `read` against `db` as it was at the moment `asOf` names: the moment planned from the
 * database's history, its file found kept or restored (see `as-of-cache.ts`), opened read-only
 * and hardened as every agent connection is; the read itself is the same function, with the
 * same guard, as a read of the live database. The result says which moment it read
 * (`asOf.restoredTo`: the time of the last commit the state holds).
 */
export function readAsOf(
  handles: HandleCache,
  history: HistoryCapture | undefined,
  dataDir: string,
  db: DbTarget,
  asOf: AsOfRead,
  read: (conn: Database.Database) => object,
): ExecOutcome {
  if (!history) throw new AgentDbError('INVALID_ARGUMENTS', 'as_of reads history, which is off on this worker (HISTORY_CAPTURE=off)');
  const now = Date.now();
  if (now - sweptAt >= SWEEP_EVERY_MS) {
    sweptAt = now;
    sweepMoments(dataDir, history.opts.asOfKeepMs ?? DEFAULT_KEEP_MS, now);
  }
  // At most MAX_CONNECTIONS stats: a file dropped since the last read is let go before another is built.
  closeDropped();
  const key = `${db.id}\n${'at' in asOf.target ? asOf.target.at : asOf.target.callKeys.join('\n')}`;
  let plan = reusablePlan(key, now);
  // A call id's moment is found through the live database's record of the call, which a restore
  // or its undo changes: a kept plan is used only while the record is the one it was planned
  // from (review R29b L2: after a restore, ids asked a moment ago answered from the old line).
  if (plan && !('at' in asOf.target) && recordOf(handles, db, asOf.target.callKeys) !== plans.get(key)?.ran) {
    plans.delete(key);
    plan = undefined;
  }
  if (!plan) {
    // History first holds every write answered before (another child may still be copying the
    // last one): the moment is planned from history, as a fork's is.
    const wasOpen = handles.isOpen(db.path);
    let live: Database.Database | undefined = handles.open(db, 'read');
    if (handles.isPlaceholder(live)) live = undefined;
    else if (wasOpen) history.run(live, db);
    const source = localSource(dataDir, db.id);
    try {
      plan = planAsOf(source, live, asOf.target, history.opts.retentionDays, now);
    } catch (err) {
      const cause = codeOf(err) === 'HISTORY_BEHIND' ? history.behindCause(db.path) : undefined;
      throw cause ? new AgentDbError('HISTORY_BEHIND', `${(err as AgentDbError).detail} (${cause})`) : err;
    }
    // Rows of an older state are not answered as a later moment's (see `behind-refusal.ts`).
    if ('at' in asOf.target) refuseBehind(history, source, db, asOf.target.at, 'a read as of', 'nothing was read');
    // A time after this read began may still gain commits answered after it: planned again.
    if (!('at' in asOf.target) || asOf.target.at < now)
      keepPlan(key, plan, now, 'at' in asOf.target || !live ? undefined : recordedAt(live, asOf.target.callKeys)?.at);
  }
  const kept = momentFile(dataDir, db.id, plan, asOf.build === true);
  if (!kept) return { ok: true, result: null, asOf: { needsRoom: momentBytes(plan) } };
  if (asOf.buildOnly) return { ok: true, result: null, asOf: { materialised: kept.materialised } };
  const result = read(connection(kept.file));
  return { ok: true, result: { ...result, asOf: { restoredTo: new Date(plan.restoredTo).toISOString() } }, asOf: { materialised: kept.materialised } };
}

/**
 * Moments planned lately, by database and target, with when: a moment in the past plans the same
 * until history is pruned or a call's record expires, so a read of it within {@link PLAN_REUSE_MS}
 * skips waiting for capture and reading the history's indexes (most of a kept moment's read).
 */
const plans = new Map<string, { plan: RestorePlan; at: number; ran?: number }>();
const PLAN_REUSE_MS = 60_000;
const MAX_PLANS = 256;

/** When the live database's record of the call says it ran, or undefined (no record, no file). */
function recordOf(handles: HandleCache, db: DbTarget, callKeys: readonly string[]): number | undefined {
  const live = handles.open(db, 'query');
  return handles.isPlaceholder(live) ? undefined : recordedAt(live, callKeys)?.at;
}

function reusablePlan(key: string, now: number): RestorePlan | undefined {
  const hit = plans.get(key);
  if (!hit) return undefined;
  if (now - hit.at < PLAN_REUSE_MS) return hit.plan;
  plans.delete(key);
  return undefined;
}

function keepPlan(key: string, plan: RestorePlan, now: number, ran: number | undefined): void {
  plans.delete(key);
  plans.set(key, { plan, at: now, ...(ran !== undefined ? { ran } : {}) });
  if (plans.size > MAX_PLANS) plans.delete(plans.keys().next().value!);
}

/**
 * Read-only connections to kept moments, least recently used first, with the inode each was
 * opened on. Kept open, as the handle cache keeps a database's: opening one, reading its schema
 * and preparing the statement again was most of a kept moment's read. A file is never changed
 * once built (see `as-of-cache.ts`), so a connection reads right as long as its file is the same.
 */
const connections = new Map<string, { conn: Database.Database; ino: number }>();
/** Connections to kept moments a child keeps at most (each holds its file until closed, dropped or not). */
const MAX_CONNECTIONS = 8;

function connection(file: string): Database.Database {
  const ino = fs.statSync(file).ino;
  const hit = connections.get(file);
  connections.delete(file);
  if (hit && hit.ino === ino) {
    connections.set(file, hit);
    return hit.conn;
  }
  if (hit) closeConnection(hit.conn);
  const conn = new Database(file, { readonly: true, fileMustExist: true });
  try {
    hardenConnection(conn);
  } catch (err) {
    conn.close();
    throw err;
  }
  connections.set(file, { conn, ino });
  for (const [oldest, entry] of connections) {
    if (connections.size <= MAX_CONNECTIONS) break;
    connections.delete(oldest);
    closeConnection(entry.conn);
  }
  watchDropped();
  return conn;
}

/**
 * Closes connections to dropped moments every {@link CLOSE_DROPPED_EVERY_MS} while any is open,
 * with no read of the past needed: a child that read a moment and then read only live databases
 * (or nothing) would otherwise hold the dropped file's disk until it stops. Never keeps the child up.
 */
function watchDropped(): void {
  if (closer) return;
  closer = setInterval(() => {
    try {
      closeDropped();
    } catch {
      // Tried again at the next tick, or by the next read of the past.
    }
    if (connections.size === 0) {
      clearInterval(closer);
      closer = undefined;
    }
  }, CLOSE_DROPPED_EVERY_MS);
  closer.unref();
}

/** Closes the connections whose file was dropped, so that its disk comes back. */
function closeDropped(): void {
  for (const [file, entry] of connections) {
    if (fs.statSync(file, { throwIfNoEntry: false })?.ino === entry.ino) continue;
    connections.delete(file);
    closeConnection(entry.conn);
  }
}

function closeConnection(conn: Database.Database): void {
  forgetStatements(conn);
  conn.close();
}
