import { parseDatabaseId } from '../contracts/database-id.ts';
import { AgentDbError } from '../errors.ts';

/** A person reading a workspace's data: their workspace and their name in it. */
export interface DataReader {
  workspace: string;
  member: string;
}

/**
 * What every surface answers anyone asking for a database of a workspace other than their own
 * (the data browser, its CSV, history, activity, restores and backups, over /v1, the web page, the
 * CLI with a key, MCP): NOT_FOUND, as for a database that does not exist, decided by the id
 * alone before anything is looked at, so it says nothing of whether the database exists. The
 * history said NOT_FOUND and the data browser NOT_PERMITTED (session 32, A3); NOT_FOUND is also
 * what another workspace's call, approval, task or offloaded result answers.
 */
export function foreignDatabase(db: string, workspace: string): AgentDbError {
  return new AgentDbError('NOT_FOUND', `there is no database ${db} in workspace ${workspace}: a key reads the databases of its own workspace only`);
}

/**
 * The rule "a person reads only the databases of their own workspace" (the web page's Data
 * browser: tables, grid pages, CSV exports). The data browser enforces it for every adapter; the
 * web page alone checked it before (session 31, H6), so another adapter over the browser would
 * have read any workspace's data. Answers `db` when it is `reader`'s.
 * @throws AgentDbError NOT_FOUND for a database of another workspace ({@link foreignDatabase}).
 */
export function checkMemberDatabase(reader: DataReader, db: string): string {
  const { workspace } = parseDatabaseId(db);
  if (workspace !== reader.workspace) throw foreignDatabase(db, reader.workspace);
  return db;
}
