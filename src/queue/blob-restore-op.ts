import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { openBlobStore } from '../history/blob-stores.ts';
import { restoreFromBlob } from '../history/blob-restore.ts';
import { databasePath, parseDatabaseId } from '../store/database-id.ts';
import type { ShardOpHandler } from './shard-ops.ts';

/**
 * Shard op `restoreFromBlob` (db: the database id, args `{ at?: number }` epoch ms): on the
 * shard's owner, rebuilds a database that does not exist here from the blob store alone (see
 * `restoreFromBlob`). On the owner, because it creates the database's file, and no other
 * process may.
 */
export const blobRestoreOp: ShardOpHandler = async (data, ctx) => {
  const { config, shard } = ctx;
  if (typeof data.db !== 'string') throw new AgentDbError('INVALID_ARGUMENTS', 'a disaster restore names its database');
  const { workspace, agent } = parseDatabaseId(data.db);
  const at = (data.args as { at?: unknown } | undefined)?.at;
  if (at !== undefined && (typeof at !== 'number' || !Number.isFinite(at))) throw new AgentDbError('INVALID_ARGUMENTS', 'at must be a time in epoch ms');
  const store = openBlobStore(config);
  try {
    return await restoreFromBlob(store, {
      id: data.db,
      dbPath: databasePath(config.dataDir, workspace, agent, shard),
      workDir: path.join(config.dataDir, 'tmp'),
      ...(at !== undefined ? { at } : {}),
    });
  } finally {
    await store.close();
  }
};
