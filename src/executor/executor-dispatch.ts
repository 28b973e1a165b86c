import { AgentDbError } from '../errors.ts';
import { isInside } from '../contracts/database-id.ts';
import type { ChildOptions, DbTarget, ExecOutcome, ExecRequest } from './executor-protocol.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import { checkDropName, describe, drop, dropObject, dropTarget, query, tryDropAlone, replayedWrite, toOpError, write } from '../sqlite/sqlite-ops.ts';
import { diskIsFull, fullCause } from '../sqlite/sqlite-errors.ts';
import { checkedStatement, statementCache } from '../sqlite/statement-cache.ts';
import { recordAudit } from '../sqlite/sqlite-audit.ts';
import { activitySince, readActivity } from '../sqlite/sqlite-activity.ts';
import { committedCall, effectDigest, type RecordedOutcome } from '../sqlite/call-record.ts';
import { committedInClosedFile } from '../history/closed-file-record.ts';
import { cutUncommittedTail } from '../history/uncommitted-tail.ts';
import { cutUnenteredTail } from '../sqlite/unentered-tail.ts';
import { putBackDeadWal } from './dead-wal.ts';
import { jsonBytes, resultBudget } from '../sqlite/result-budget.ts';
import { browsePage } from '../sqlite/sqlite-browse.ts';
import { databaseFigures } from '../sqlite/sqlite-figures.ts';
import { csvChunk } from '../sqlite/sqlite-csv-export.ts';
import { ResultSpill, spillDir } from '../sqlite/result-spill.ts';
import type { HistoryCapture } from '../history/handle-capture.ts';
import { restoreInPlace } from '../history/restore-requests.ts';
import { restoreInto } from '../history/restore-into.ts';
import { auditedStatement } from '../history/restore-audit.ts';
import { snapshotNow } from '../history/snapshot-now.ts';
import { previewEffect } from '../sqlite/sqlite-effect-preview.ts';
import { EffectChanged } from '../sqlite/sqlite-effect.ts';
import { readAsOf } from './as-of-read.ts';
import { withFullDisk } from '../history/full-disk-where.ts';

/**
 * Runs one request in the executor child and says how it ended. Never throws: every failure,
 * agent-caused or not, becomes an `ok: false` outcome with a registry code, because it has to
 * cross a process boundary as plain JSON. Results are built to fit MAX_RESULT_BYTES once in
 * their envelope (see `resultBudget`).
 */
export function dispatch(handles: HandleCache, opts: ChildOptions, req: ExecRequest, history?: HistoryCapture): ExecOutcome {
  const budget = resultBudget(opts.maxResultBytes);
  try {
    // Not answered ok into a WAL no other process reads (`dead-wal.ts`).
    if (history && (req.op === 'write' || req.op === 'drop' || req.op === 'audit')) putBackDeadWal(handles, req.db.path);
    if (req.op === 'evict') return { ok: true, result: { closed: handles.evictShards(req.shards) } };
    if (req.op === 'close') return { ok: true, result: { closed: handles.isOpen(req.path) ? (handles.evict(req.path), 1) : 0 } };
    if (req.op === 'stats') return { ok: true, result: { handles: handles.size, statements: statementCache.stats(), rss: process.memoryUsage().rss } };
    // The parent built this path from checked names; the child re-checks, since it is the one
    // process that opens files. A path with a handle open was checked when it was opened.
    if (!handles.isOpen(req.db.path) && !isInside(opts.dataDir, req.db.path)) {
      throw new AgentDbError('INTERNAL', `database ${req.db.id} resolves outside the data folder`);
    }
    switch (req.op) {
      case 'describe':
        if (req.asOf) return readAsOf(handles, history, opts.dataDir, req.db, req.asOf, (db) => describe(db, budget));
        return { ok: true, result: describe(handles.open(req.db, 'query'), budget) };
      case 'figures': {
        const db = handles.open(req.db, 'query');
        return { ok: true, result: databaseFigures(db, req.db.path, handles.isPlaceholder(db)) };
      }
      case 'query': {
        const spill = req.offload ? spillOpener(opts.dataDir, opts.maxOffloadBytes) : undefined;
        const read = (db: Parameters<typeof query>[0]) => query(db, req.sql, req.params, req.maxRows, budget, req.mode, spill);
        if (req.asOf) return readAsOf(handles, history, opts.dataDir, req.db, req.asOf, read);
        return { ok: true, result: read(handles.open(req.db, 'query')) };
      }
      case 'browse':
        if (req.asOf) return readAsOf(handles, history, opts.dataDir, req.db, req.asOf, (db) => browsePage(db, req.args));
        return { ok: true, result: browsePage(handles.open(req.db, 'query'), req.args) };
      case 'activity': {
        const db = handles.open(req.db, 'query');
        if (req.catchUp) {
          try {
            if (!handles.isPlaceholder(db)) history?.catchUp(db, req.db);
          } catch {
            // Logged by the capture; still failing, the page says it is behind (review R29b L1).
          }
          return { ok: true, result: null };
        }
        if (req.after !== undefined) return { ok: true, result: handles.isPlaceholder(db) ? { rows: [], kept: 0 } : activitySince(db, req.after, req.limit) };
        return { ok: true, result: handles.isPlaceholder(db) ? [] : readActivity(db, req.seqs) };
      }
      case 'csv':
        return { ok: true, result: csvChunk(handles.open(req.db, 'query'), req.args) };
      case 'audit': {
        const db = handles.open(req.db, 'write');
        recordAudit(db, req.entry);
        history?.run(db, req.db);
        return { ok: true, result: { recorded: true } };
      }
      case 'restoreAudited':
        return { ok: true, result: { statement: auditedStatement(handles.open(req.db, 'read'), req.id) ?? null } };
      case 'check':
        checkedStatement(handles.open(req.db, 'query'), req.sql, req.mode);
        return { ok: true, result: { admitted: true } };
      case 'write': {
        const db = handles.open(req.db, 'write');
        history?.catchUp(db, req.db);
        const over = req.overQuota;
        const admit =
          over === undefined && !history
            ? undefined
            : () => {
                if (over !== undefined) throw new AgentDbError('QUOTA_EXCEEDED', over);
                history?.checkQuota(req.db);
                history?.checkBacklog(req.db);
              };
        const { replayed, ...result } = write(
          db,
          req.sql,
          req.params,
          req.callKey,
          req.db.limits,
          budget,
          admit,
          req.effect,
          req.activity && { ...req.activity, statement: req.activity.statement ?? req.sql },
        );
        if (!replayed) history?.afterCommit(db, req.db);
        return replayed ? { ok: true, result: replayedFit(result, budget), replayed: true } : { ok: true, result };
      }
      case 'effect': {
        // The stand-in for a database never written has no tables; a preview must not create it.
        const db = handles.open(req.db, 'read');
        if (handles.isPlaceholder(db)) return { ok: true, result: null };
        return { ok: true, result: previewEffect(db, req.sql, req.params, req.db.limits, req.limits) };
      }
      case 'checkDrop': {
        checkDropName(req.table);
        // The stand-in for a database never written has no tables, so this answers NOT_FOUND.
        const db = handles.open(req.db, 'read');
        const found = dropTarget(db, req.table);
        tryDropAlone(db, found);
        return { ok: true, result: dropObject(db, found) };
      }
      case 'drop': {
        const db = handles.open(req.db, 'read');
        if (handles.isPlaceholder(db)) {
          // A database never written has no tables; answering here keeps a drop from creating it.
          checkDropName(req.table);
          throw new AgentDbError('NOT_FOUND', `there is no table or view named ${JSON.stringify(req.table)}`);
        }
        const { replayed, ...result } = drop(db, req.table, req.callKey, req.expect, req.activity);
        if (!replayed) history?.afterCommit(db, req.db);
        return replayed ? { ok: true, result, replayed: true } : { ok: true, result };
      }
      case 'recorded': {
        // Opening the handle also copies into history the frames the dead child committed.
        const db = handles.open(req.db, 'read');
        const found = committedCall(db, { key: req.callKey, digest: effectDigest(req.effect) });
        // A write's record leaves out what its answer says of no RETURNING rows: the answer has it back.
        return { ok: true, result: found.committed && req.effect[0] === 'write' ? { ...found, result: replayedWrite(found.result) } : found };
      }
      case 'restore':
        return { ok: true, result: restoreInPlace(handles, needHistory(history), opts.dataDir, req) };
      case 'restoreInto':
        return { ok: true, result: restoreInto(handles, needHistory(history), opts.dataDir, req) };
      case 'capture': {
        const db = handles.open(req.db, 'read');
        if (!handles.isPlaceholder(db)) history?.run(db, req.db);
        return { ok: true, result: {} };
      }
      case 'snapshot':
        return { ok: true, result: snapshotNow(handles, needHistory(history), opts.dataDir, req) };
    }
  } catch (err) {
    // Only a write can meet the plan's size limit; any other SQLITE_FULL is the disk (a read's
    // temporary files, a handle's -shm).
    const grows = req.op === 'write' || req.op === 'drop' || req.op === 'audit';
    const error = toOpError(
      err,
      () => (grows ? fullCause(handles.isOpen(req.db.path) ? handles.open(req.db, 'read') : undefined, req.db.path) : 'STORAGE_FULL'),
      () => 'db' in req && diskIsFull(req.db.path),
    );
    // A handle that met corruption is not reused: the next call reopens (and re-checks) the file.
    if (error.code === 'DATABASE_CORRUPT' && 'db' in req) {
      try {
        handles.evict(req.db.path);
      } catch {
        // History could not copy its WAL first: the handle stays open (see `HandleCache`).
      }
    }
    // A write or drop on a full disk may fail before it finds its own exactly-once record (opening
    // a database whose handles closed, history's copy at open): one an earlier run committed (its
    // worker SIGKILLed before the answer) answers what it did, not STORAGE_FULL "nothing was written".
    // A commit SQLite wrote whole but could not enter in the WAL index must not come back later:
    // a write's, and a restore in place's or a snapshot's own (their audit rows, the restored pages).
    if (error.code === 'STORAGE_FULL' && 'db' in req && commits(req.op)) cutFailedCommit(handles, req.db);
    if (error.code === 'STORAGE_FULL' && (req.op === 'write' || req.op === 'drop')) {
      const found = recordedBeforeFailure(handles, req);
      // Not "nothing was written" when that is not known: the call runs again (BullMQ's retry),
      // and, its retries spent, is answered that it may have committed (`failedCallEnvelope`).
      if (found === 'unknown') return { ok: false, error: { code: 'UNAVAILABLE', detail: undecidedOnFullDisk(req.op) }, unsettled: true };
      if (found?.committed) return { ok: true, result: req.op === 'write' ? replayedFit(replayedWrite(found.result), budget) : found.result, replayed: true };
    }
    // Which disk is full (history's own mount or the databases'), and what to do: the registry's
    // message names neither (F17's leftover: a restore refused on history's full mount). Its
    // folders only to an operator's restore: an agent or member is told which disk, not where.
    if (error.code === 'STORAGE_FULL' && 'db' in req) {
      const operator = req.op === 'restore' || req.op === 'restoreInto';
      error.detail = withFullDisk(error.detail, opts.dataDir, req.db, req.op === 'restoreInto' ? [req.db.id, req.source] : undefined, operator);
    }
    return { ok: false, error, ...(err instanceof EffectChanged ? { effect: err.effect } : {}) };
  }
}

/** Requests that commit in their database (a restore into another database commits in its fork, removed when it fails). */
function commits(op: ExecRequest['op']): boolean {
  return op === 'write' || op === 'drop' || op === 'audit' || op === 'restore' || op === 'snapshot';
}

/**
 * Cuts what a commit that failed on a full disk left past the WAL index's end: on this child's
 * handle, under its write lock; with none open (a restore evicted it), from the file as the next
 * open would (`cutUnenteredTail`, which cuts nothing while any connection has the database open).
 */
function cutFailedCommit(handles: HandleCache, db: DbTarget): void {
  try {
    if (handles.isOpen(db.path)) cutUncommittedTail(handles.open(db, 'read'), db.path);
    else cutUnenteredTail(db.path);
  } catch {
    // The handle could not be had again: the failure is answered as it is, and the next open cuts.
  }
}

/**
 * The record of a write or drop that failed on a full disk: read on its handle when the open got
 * that far (a hit runs none of history's hooks again), else from the closed file itself.
 */
function recordedBeforeFailure(handles: HandleCache, req: Extract<ExecRequest, { op: 'write' | 'drop' }>): RecordedOutcome | 'unknown' | undefined {
  const call = { key: req.callKey, digest: effectDigest(req.op === 'write' ? ['write', req.sql, req.params] : ['drop', req.table]) };
  if (!handles.isOpen(req.db.path)) return committedInClosedFile(req.db.path, call) ?? 'unknown';
  try {
    return committedCall(handles.open(req.db, 'read'), call);
  } catch {
    return undefined;
  }
}

/** Why a write or drop whose database could neither be opened nor read on a full disk is run again. */
function undecidedOnFullDisk(op: 'write' | 'drop'): string {
  return `the disk is full and the database cannot be opened, and whether it committed in an earlier run of this ${op} (its worker gone before answering) could not be read from its files (past 128 MiB, or unreadable): it runs again, and its call id answers its outcome once the disk has room`;
}

function needHistory(history: HistoryCapture | undefined): HistoryCapture {
  if (!history) throw new AgentDbError('INVALID_ARGUMENTS', 'point-in-time history is off on this worker (HISTORY_CAPTURE=off)');
  return history;
}

/**
 * Where a query's result too large for its envelope goes: a file under the data folder, which
 * the worker uploads to the blob store (`result.offloaded`).
 */
function spillOpener(dataDir: string, maxBytes?: number): (columns: string[]) => ResultSpill {
  return (columns) => new ResultSpill(spillDir(dataDir), columns, maxBytes);
}

/**
 * A recorded result as it replays: it fitted the limit it was recorded under, which may have
 * been larger than today's; then its rows go (the write itself is long done).
 */
function replayedFit<T extends { rows?: unknown[] }>(result: T, budget: number): T {
  if (!Array.isArray(result.rows) || jsonBytes(result) <= budget) return result;
  const note = 'the recorded result of this call passes the result size limit; its RETURNING rows are left out';
  return { ...result, columns: [], rows: [], truncated: true, oversize: true, note };
}
