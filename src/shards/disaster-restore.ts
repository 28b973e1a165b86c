import { codeOf, type ErrorCode } from '../errors.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { RestoreActor } from '../executor/executor-protocol.ts';
import type { BlobRestoreResult } from '../history/blob-restore.ts';
import type { HistoryClient } from './history-client.ts';

/** One database of a disaster restore, as it ended. */
export type DisasterRestoreLine =
  | { database: string; outcome: 'restored'; result: BlobRestoreResult }
  /** It exists here already: a disaster restore only brings back what is missing, so it may be run again after a failure. */
  | { database: string; outcome: 'skipped'; reason: string }
  | { database: string; outcome: 'failed'; error: { code: ErrorCode; detail: string } };

/** What a disaster restore did, in all. */
export interface DisasterRestoreSummary {
  /** The blob store restored from, as the workers see it. */
  store: string;
  databases: number;
  restored: number;
  skipped: number;
  failed: number;
}

/** How many databases are rebuilt at once: each downloads and checks a whole generation on its shard's owner. */
const AT_ONCE = 4;

/**
 * Restores every database the blob store holds a backup of (or only `workspace`'s) that does not
 * exist here, each as `agentdb restore DB --from-blob` would (a shard op on its owner), to `at`
 * or the latest moment backed up. Before, a disaster restore took one command per database,
 * named by listing the store. `onEach` hears each database as it ends; one failing does not
 * stop the others.
 */
export async function restoreAllFromBlob(
  client: HistoryClient,
  opts: { workspace?: string; at?: string | number; dryRun?: boolean; by: RestoreActor },
  onEach: (line: DisasterRestoreLine) => void,
): Promise<DisasterRestoreSummary> {
  const held = await client.blobHoldings('operator');
  const ids = held.databases
    .filter((d) => d.manifest && (opts.workspace === undefined || parseDatabaseId(d.database).workspace === opts.workspace))
    .map((d) => d.database);
  const summary: DisasterRestoreSummary = { store: held.store, databases: ids.length, restored: 0, skipped: 0, failed: 0 };
  let next = 0;
  const one = async (database: string): Promise<DisasterRestoreLine> => {
    try {
      const result = (await client.restoreFromBlob(
        database,
        { ...(opts.at !== undefined ? { at: opts.at } : {}), ...(opts.dryRun ? { dryRun: true } : {}), by: opts.by },
        'operator',
      )) as BlobRestoreResult;
      return result.refused ? { database, outcome: 'skipped', reason: result.refused } : { database, outcome: 'restored', result };
    } catch (err) {
      const code = codeOf(err);
      if (!code) throw err;
      const detail = (err as { detail?: string }).detail ?? String(err);
      return code === 'DATABASE_EXISTS' ? { database, outcome: 'skipped', reason: detail } : { database, outcome: 'failed', error: { code, detail } };
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(AT_ONCE, ids.length) }, async () => {
      while (next < ids.length) {
        const line = await one(ids[next++]!);
        if (line.outcome === 'restored') summary.restored++;
        else if (line.outcome === 'skipped') summary.skipped++;
        else summary.failed++;
        onEach(line);
      }
    }),
  );
  return summary;
}
