import { parseDatabaseId } from '../contracts/database-id.ts';
import { AgentDbError } from '../errors.ts';

/** A person reading a workspace's data: their workspace and their name in it. */
export interface DataReader {
  workspace: string;
  member: string;
}

/**
 * The rule "a person reads only the databases of their own workspace" (the web page's Data
 * browser: tables, grid pages, CSV exports). The data browser enforces it for every adapter; the
 * web page alone checked it before (session 31, H6), so another adapter over the browser would
 * have read any workspace's data. Answers `db` when it is `reader`'s.
 * @throws AgentDbError NOT_PERMITTED for a database of another workspace.
 */
export function checkMemberDatabase(reader: DataReader, db: string): string {
  const { workspace } = parseDatabaseId(db);
  if (workspace !== reader.workspace) throw new AgentDbError('NOT_PERMITTED', `${reader.member} is a member of ${reader.workspace}, not of ${workspace}.`);
  return db;
}
