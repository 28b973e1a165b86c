import type { Database } from 'better-sqlite3';
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
  decision: 'approved' | 'rejected' | 'expired';
  decidedBy?: string;
  decidedAt?: number;
  reason?: string;
  /** How the approved call ended; absent when it did not run. */
  ranOk?: boolean;
  ranCode?: string;
  at: number;
}

const ready = new WeakSet<Database>();

/** Records (or re-records, on a retried job) one decision in the database's audit table. */
export function recordAudit(db: Database, e: AuditEntry): void {
  if (!ready.has(db)) {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${AUDIT_TABLE} (approval_id TEXT PRIMARY KEY, call_id TEXT NOT NULL, tool TEXT NOT NULL, tier TEXT NOT NULL,
        statement TEXT NOT NULL, params TEXT, requester TEXT NOT NULL, decision TEXT NOT NULL, decided_by TEXT, decided_at INTEGER,
        reason TEXT, ran_ok INTEGER, ran_code TEXT, at INTEGER NOT NULL) WITHOUT ROWID`,
    );
    ready.add(db);
  }
  trusted(
    db,
    `INSERT OR REPLACE INTO ${AUDIT_TABLE} (approval_id, call_id, tool, tier, statement, params, requester, decision, decided_by, decided_at, reason, ran_ok, ran_code, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
  );
}
