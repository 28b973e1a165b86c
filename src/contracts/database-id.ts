import path from 'node:path';
import { NAME_PATTERN } from './name-pattern.ts';
import { AgentDbError } from '../errors.ts';

/**
 * The file name of a workspace's shared database inside its folder. Agent names cannot start
 * with `_` (see {@link NAME_PATTERN}), so no agent's file can ever collide with it.
 */
export const WORKSPACE_FILE = '_workspace.sqlite';

/** The folder, under the data folder, of the call-id ledgers: `call-ids/<workspace>.sqlite` (see `CallIdLedger`). */
export const CALL_ID_LEDGER_DIR = 'call-ids';

function checkName(what: 'workspace' | 'agent', name: string): void {
  // Names become folder and file names: re-checked here even though contracts validated them,
  // because a path is built from them and one missed caller would be a traversal.
  if (!NAME_PATTERN.test(name)) throw new AgentDbError('INVALID_ARGUMENTS', `${what} name ${JSON.stringify(name)} is not allowed`);
}

/**
 * The id of a database: `<workspace>` for the workspace's shared database, `<workspace>/<agent>`
 * for an agent's own. The id is what shards are hashed from, so its spelling must never change.
 * @throws AgentDbError INVALID_ARGUMENTS when a name is outside {@link NAME_PATTERN}.
 */
export function databaseId(workspace: string, agent?: string): string {
  checkName('workspace', workspace);
  if (agent === undefined) return workspace;
  checkName('agent', agent);
  return `${workspace}/${agent}`;
}

/**
 * What to add to "database X does not exist" for a bare workspace name: a user who meant an
 * agent's database most often left out the workspace.
 */
export function sharedNote(id: string): string {
  return id.includes('/') ? '' : ` (${id} alone names workspace ${id}'s shared database; an agent's database is <workspace>/<agent>, as <workspace>/${id})`;
}

/**
 * Splits a database id back into its names.
 * @throws AgentDbError INVALID_ARGUMENTS when the id is not one {@link databaseId} makes.
 */
export function parseDatabaseId(id: string): { workspace: string; agent?: string } {
  const parts = id.split('/');
  if (parts.length === 1) return { workspace: databaseId(parts[0]!) };
  if (parts.length === 2) {
    databaseId(parts[0]!, parts[1]!);
    return { workspace: parts[0]!, agent: parts[1]! };
  }
  throw new AgentDbError('INVALID_ARGUMENTS', `database id ${JSON.stringify(id)} is not <workspace> or <workspace>/<agent>`);
}

const encoder = new TextEncoder();

/**
 * The shard that owns database `id`: FNV-1a (32 bit) of the id's UTF-8 bytes, modulo
 * `shardCount`. Files live under their shard's folder and leases are per shard, so this
 * function must give the same answer in every version; `test/unit/database-id.test.ts` pins
 * values.
 */
export function shardOf(id: string, shardCount: number): number {
  if (!Number.isInteger(shardCount) || shardCount < 1) throw new RangeError(`shardCount must be a positive integer, got ${shardCount}`);
  let hash = 0x811c9dc5;
  // An ASCII id is its own UTF-8 bytes: read them off the string. Encoding made a buffer per
  // call, and both the client and the worker route every call through here (issue 31).
  for (let i = 0; i < id.length; i++) {
    const code = id.charCodeAt(i);
    if (code >= 0x80) return fnvOfUtf8(id, shardCount);
    hash ^= code;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shardCount;
}

/** {@link shardOf} of an id with non-ASCII characters, hashed over its UTF-8 encoding. */
function fnvOfUtf8(id: string, shardCount: number): number {
  let hash = 0x811c9dc5;
  for (const byte of encoder.encode(id)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shardCount;
}

/**
 * True when `candidate` is `root` itself or lies below it, after resolving both.
 * Used wherever a path built from outside input is about to be opened.
 */
export function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(path.resolve(root), path.resolve(candidate));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * Where a database's file lives: `DATA_DIR/shards/<shard>/<workspace>/_workspace.sqlite` for the
 * shared one, `…/<workspace>/<agent>.sqlite` for an agent's.
 * @throws AgentDbError INVALID_ARGUMENTS for a bad name; Error if the path would leave `dataDir`.
 */
export function databasePath(dataDir: string, workspace: string, agent: string | undefined, shard: number): string {
  databaseId(workspace, agent);
  if (!Number.isInteger(shard) || shard < 0) throw new RangeError(`shard must be a non-negative integer, got ${shard}`);
  const root = path.resolve(dataDir);
  const file = path.resolve(root, 'shards', String(shard), workspace, agent === undefined ? WORKSPACE_FILE : `${agent}.sqlite`);
  // Defence in depth: the names were checked above, but the one guarantee that matters is that
  // nothing outside DATA_DIR is ever opened.
  if (!isInside(root, file)) throw new Error(`database path ${file} escapes the data folder ${root}`);
  return file;
}
