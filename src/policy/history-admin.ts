import { parseDatabaseId } from '../contracts/database-id.ts';
import { AgentDbError } from '../errors.ts';
import type { Member } from '../registry/members.ts';
import { foreignDatabase } from './member-databases.ts';

/**
 * Who asks for a database's history or a restore: a person with a member key (the HTTP API, the
 * web page, any adapter that serves people), or the operator at the CLI, who holds the data
 * folder and Redis, and so every database, already.
 */
export type HistoryCaller = { member: Pick<Member, 'workspace' | 'name' | 'role'> } | 'operator';

/** Whether `member` may read history and restore: for a page deciding what to offer. */
export function isHistoryAdmin(member: Pick<Member, 'role'>): boolean {
  return member.role === 'admin';
}

/**
 * The rule "history and restore take a workspace admin": a restore rewrites a database that
 * agents and other members use, and history shows every past state of it. The history client
 * enforces it, so every adapter gets it, whatever it checked itself.
 * @throws AgentDbError NOT_FOUND for a database of another workspace, as for one that does not
 * exist (`foreignDatabase`: nothing tells a key which databases exist elsewhere); NOT_PERMITTED for a member who is
 * not an admin.
 */
export function checkHistoryAdmin(caller: HistoryCaller, db: string): void {
  if (caller === 'operator') return;
  const { member } = caller;
  const { workspace } = parseDatabaseId(db);
  if (member.workspace !== workspace) throw foreignDatabase(db, member.workspace);
  if (!isHistoryAdmin(member))
    throw new AgentDbError('NOT_PERMITTED', `restoring and reading a database's history takes an admin of ${workspace}; ${member.name} is a ${member.role}`);
}
