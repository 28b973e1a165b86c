import Database from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { hardenConnection } from '../guard/engine-check.ts';
import { momentBytes, momentFile, sweepMoments } from '../history/as-of-cache.ts';
import { planAsOf } from '../history/as-of-moment.ts';
import type { HistoryCapture } from '../history/handle-capture.ts';
import { localSource } from '../history/history-files.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import { forgetStatements } from '../sqlite/statement-cache.ts';
import type { AsOfRead, DbTarget, ExecOutcome } from './executor-protocol.ts';

/** AS_OF_KEEP_MINUTES' default, for a child started without it. */
const DEFAULT_KEEP_MS = 15 * 60_000;
/** How often, at most, a child sweeps moments past their keep (on a read of the past). */
const SWEEP_EVERY_MS = 60_000;
let sweptAt = 0;

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
  // History first holds every write answered before (another child may still be copying the
  // last one): the moment is planned from history, as a fork's is.
  const wasOpen = handles.isOpen(db.path);
  let live: Database.Database | undefined = handles.open(db, 'read');
  if (handles.isPlaceholder(live)) live = undefined;
  else if (wasOpen) history.run(live, db);
  const plan = planAsOf(localSource(dataDir, db.id), live, asOf.target, history.opts.retentionDays, now);
  const kept = momentFile(dataDir, db.id, plan, asOf.build === true);
  if (!kept) return { ok: true, result: null, asOf: { needsRoom: momentBytes(plan) } };
  const conn = new Database(kept.file, { readonly: true, fileMustExist: true });
  try {
    hardenConnection(conn);
    const result = read(conn);
    return { ok: true, result: { ...result, asOf: { restoredTo: new Date(plan.restoredTo).toISOString() } }, asOf: { materialised: kept.materialised } };
  } finally {
    forgetStatements(conn);
    conn.close();
  }
}
