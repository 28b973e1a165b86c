import { AgentDbError } from '../errors.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';

/**
 * The rules every restore `into` a new database follows, wherever it is asked for (the history
 * client, and the shard ops that anyone holding Redis can queue): the fork stays in its
 * workspace, is not the database it is taken from, and is never the workspace's shared
 * database, which every agent of the workspace reads (a fork of an agent's database there
 * would hand its private tables to all of them). Whether a registered agent has the name is
 * the caller's to check (it needs the registry).
 * @throws AgentDbError INVALID_ARGUMENTS or DATABASE_EXISTS naming what is wrong.
 */
export function checkForkTarget(source: string, into: string): void {
  if (into === source) throw new AgentDbError('DATABASE_EXISTS', `${into} is the database restored from; restore it in place instead`);
  const from = parseDatabaseId(source);
  const to = parseDatabaseId(into);
  if (to.workspace !== from.workspace) {
    throw new AgentDbError('INVALID_ARGUMENTS', `a database is restored into a new database of its own workspace (${from.workspace}/<name>)`);
  }
  if (to.agent === undefined) {
    throw new AgentDbError(
      'DATABASE_EXISTS',
      `${into} is the workspace's shared database, which every agent of ${to.workspace} reads; restore into a new agent database (${to.workspace}/<name>) no agent has`,
    );
  }
}
