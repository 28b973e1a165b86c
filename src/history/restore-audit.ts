import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { walPages } from './wal-format.ts';
import { openedElsewhere } from '../sqlite/file-openers.ts';
import { lockHolders } from '../sqlite/lock-holders.ts';
import { AUDIT_TABLE, recordAudit } from '../sqlite/sqlite-audit.ts';
import { trusted } from '../sqlite/sqlite-trusted.ts';
import { carryActivity, type allActivity } from '../sqlite/sqlite-activity.ts';

/** The activity rows of the file a restore replaces, to carry into the restored one (see `carryActivity`). */
export type CarriedActivity = ReturnType<typeof allActivity>;

/** Who asked for a restore, as the database's audit keeps it. */
export interface RestoreActor {
  who: string;
  via: 'key' | 'operator';
}

/**
 * The restore's row in the database's own audit table, in one commit with its activity row and
 * the activity rows the restored state lacks (`carried`: the calls it undid stay listed).
 */
export function audit(db: Parameters<typeof recordAudit>[0], by: RestoreActor, id: string, statement: string, at: number, carried: CarriedActivity = []): void {
  db.transaction(() => {
    carryActivity(db, carried);
    auditRow(db, by, id, statement, at);
  })();
}

/**
 * Whether the restore `id`'s audit row is in. The database may have no audit table: the moment
 * restored to can be older than the first row (asking it then failed every later restore of the
 * database with "no such table", the point pending for ever).
 */
export function audited(db: Parameters<typeof recordAudit>[0], id: string): boolean {
  if (!trusted(db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(AUDIT_TABLE)) return false;
  return trusted(db, `SELECT 1 FROM ${AUDIT_TABLE} WHERE approval_id = ?`).get(`restore:${id}`) !== undefined;
}

/** The statement of restore `id`'s audit row (what it restored, as of when), or undefined when the row is not in. */
export function auditedStatement(db: Parameters<typeof recordAudit>[0], id: string): string | undefined {
  if (!audited(db, id)) return undefined;
  return trusted(db, `SELECT statement FROM ${AUDIT_TABLE} WHERE approval_id = ?`).pluck().get(`restore:${id}`) as string;
}

function auditRow(db: Parameters<typeof recordAudit>[0], by: RestoreActor, id: string, statement: string, at: number): void {
  recordAudit(db, {
    approvalId: `restore:${id}`,
    callId: id,
    tool: 'RESTORE',
    tier: 'operator',
    statement,
    requester: by.who,
    decision: 'restored',
    decidedBy: by.who,
    decidedVia: by.via,
    decidedAt: at,
    at,
  });
}

/**
 * Writes the restore's audit row into the restored file, before it goes in place, and says
 * which pages that commit wrote (read from its WAL before the close folds it in), for the new
 * generation's base commit. Undefined when the file is not in WAL mode (it then has no WAL to
 * read them from): every page counts then.
 */
export function auditInto(file: string, by: RestoreActor, id: string, statement: string, at: number, carried: CarriedActivity = []): Set<number> | undefined {
  const db = new Database(file, { fileMustExist: true });
  try {
    // Not durable yet on purpose: the file is synced once whole (see `checkAndSync`).
    db.pragma('synchronous = OFF');
    db.pragma('wal_autocheckpoint = 0');
    audit(db, by, id, statement, at, carried);
    if (db.pragma('journal_mode', { simple: true }) !== 'wal') return undefined;
    return walPages(`${file}-wal`);
  } finally {
    db.close();
  }
}

/** Undo ids: `u`, the time in base 36 and random bytes; sortable and never reused. */
export function newUndoId(): string {
  return `u${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
}

/** Whether no connection has `dbPath` open: the last one to close removes its -wal and -shm. */
export function closedEverywhere(dbPath: string): boolean {
  return !fs.existsSync(`${dbPath}-wal`) && !fs.existsSync(`${dbPath}-shm`);
}

/**
 * Whether another process has `dbPath` open now: it holds a lock on the -shm (every connection in
 * WAL mode holds one on its DMS byte once it has read), or a descriptor on the file (one opened
 * and not used yet holds nothing else: `openedElsewhere`). {@link closedEverywhere} after this
 * process closed its own connections must hold too before a rebuilt file is renamed over the live
 * one: it is what settles a connection of this process's own. False when it cannot be told.
 */
export function heldElsewhere(dbPath: string): boolean {
  const holders = lockHolders(`${dbPath}-shm`);
  for (const pid of holders ?? []) if (pid !== process.pid) return true;
  return openedElsewhere(dbPath);
}
