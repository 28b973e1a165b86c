import type { Database } from 'better-sqlite3';
import { recordOwnActivity } from './sqlite-activity.ts';
import { trusted } from './sqlite-trusted.ts';

/**
 * The decision audit inside each database: who approved, rejected or let expire which call,
 * when, why, and what ran. It lives in the file itself (hidden from agents and the browse page
 * like every `_agentdb_*` table), so backups and point-in-time history carry it with the data
 * it explains.
 */
export const AUDIT_TABLE = '_agentdb_audit';

/** One decision as the audit keeps it. */
export interface AuditEntry {
  approvalId: string;
  callId: string;
  tool: string;
  tier: string;
  /** The SQL (writes) or the table name (drops) the person was asked about. */
  statement: string;
  params?: unknown[];
  requester: string;
  /** `restored`: an operator or admin restored the database (`tool` RESTORE; the statement says to when). */
  decision: 'approved' | 'rejected' | 'expired' | 'restored';
  decidedBy?: string;
  /** How the decider proved who they are: their own key, or an operator's word. */
  decidedVia?: 'key' | 'operator';
  decidedAt?: number;
  reason?: string;
  /** How the approved call ended; absent when it did not run. */
  ranOk?: boolean;
  ranCode?: string;
  at: number;
}

const ready = new WeakSet<Database>();

/**
 * Records (or re-records, on a retried job) one decision in the database's audit table, with
 * its commit's activity row (`sqlite-activity.ts`): a restore's is the restore, any other is
 * agentdb's upkeep, not a call of its own (the call it decides on has its own row).
 */
export function recordAudit(db: Database, e: AuditEntry): void {
  db.transaction(() => {
    auditRow(db, e);
    // A restore's row carries the restore's start: its pages may be a commit of their own before this one.
    if (e.decision === 'restored') recordOwnActivity(db, 'restore', { by: e.requester, statement: e.statement }, e.at);
    else recordOwnActivity(db, 'upkeep');
  })();
  // Only once the table's creation is committed: a transaction that failed after creating it
  // (a full disk at its commit) rolled the table back, and a handle marked ready before would
  // skip creating it again and fail every later audit with "no such table" (SQL_ERROR).
  if (!db.inTransaction) ready.add(db);
}

function auditRow(db: Database, e: AuditEntry): void {
  if (!ready.has(db)) {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${AUDIT_TABLE} (approval_id TEXT PRIMARY KEY, call_id TEXT NOT NULL, tool TEXT NOT NULL, tier TEXT NOT NULL,
        statement TEXT NOT NULL, params TEXT, requester TEXT NOT NULL, decision TEXT NOT NULL, decided_by TEXT, decided_at INTEGER,
        reason TEXT, ran_ok INTEGER, ran_code TEXT, at INTEGER NOT NULL, decided_via TEXT) WITHOUT ROWID`,
    );
    // Files audited before decisions named their channel gain the column.
    const columns = trusted(db, `SELECT name FROM pragma_table_info('${AUDIT_TABLE}')`).pluck().all() as string[];
    if (!columns.includes('decided_via')) db.exec(`ALTER TABLE ${AUDIT_TABLE} ADD COLUMN decided_via TEXT`);
  }
  trusted(
    db,
    `INSERT OR REPLACE INTO ${AUDIT_TABLE} (approval_id, call_id, tool, tier, statement, params, requester, decision, decided_by, decided_at, reason, ran_ok, ran_code, at, decided_via)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    e.approvalId,
    e.callId,
    e.tool,
    e.tier,
    e.statement,
    e.params ? JSON.stringify(e.params) : null,
    e.requester,
    e.decision,
    e.decidedBy ?? null,
    e.decidedAt ?? null,
    e.reason ?? null,
    e.ranOk === undefined ? null : e.ranOk ? 1 : 0,
    e.ranCode ?? null,
    e.at,
    e.decidedVia ?? null,
  );
}
