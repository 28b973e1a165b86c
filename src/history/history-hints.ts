import type { ErrorCode } from '../errors.ts';

/**
 * Hints for the operator's history commands (`history`, `restore`, `backup now`, and their HTTP
 * routes), where the registry's own, written for an agent's tool calls, point at
 * DATA_DESCRIBE_SCHEMA and `agentdb tools`.
 */
export const HISTORY_HINTS: Partial<Record<ErrorCode, string>> = {
  NOT_FOUND:
    "Check the database id: <workspace>/<agent> for an agent's database, <workspace> for the workspace's shared one (URL-encoded over HTTP: acme%2Fscout); a database has history once something was written to it. From the blob store (--from-blob), the worker's store must hold a backup of it (`agentdb backup now --db DB`).",
  INVALID_ARGUMENTS:
    'Fix what the message names: a time is ISO 8601 or unix seconds, a database id <workspace> or <workspace>/<agent>; `agentdb restore --help` lists every flag, docs/history.md every field.',
  // The registry's hint is about agents' tables and drops; here the refusal is the history rule
  // (policy/history-admin.ts), review R1 low.
  NOT_PERMITTED:
    "A database's history, its activity and restores are for admins of its workspace (and the operator, at the CLI): ask an admin to look or restore for you, or an operator to give you an admin's key (`agentdb members add --workspace W --name NAME --role admin`).",
  STORAGE_FULL:
    "A disk is full: free space on the one the message names (AGENTDB_DATA_DIR's, or its history folder's when that is a disk of its own; with BLOB_STORE=folder, BLOB_DIR's) and run it again. Nothing was lost: a backup uploads next time what it could not now.",
};
