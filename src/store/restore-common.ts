import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { RestoreActor } from './executor-protocol.ts';
import { recordAudit } from './sqlite-audit.ts';

/** The restore's row in the database's own audit table. */
export function audit(db: Parameters<typeof recordAudit>[0], by: RestoreActor, id: string, statement: string, at: number): void {
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

/** Undo ids: `u`, the time in base 36 and random bytes; sortable and never reused. */
export function newUndoId(): string {
  return `u${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
}

/** Whether no connection has `dbPath` open: the last one to close removes its -wal and -shm. */
export function closedEverywhere(dbPath: string): boolean {
  return !fs.existsSync(`${dbPath}-wal`) && !fs.existsSync(`${dbPath}-shm`);
}
