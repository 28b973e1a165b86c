import type { BlobStore } from '../blobs/blob-store.ts';
import { WORKSPACE_HISTORY } from './history-files.ts';

/** What the blob store holds of one database's backups. */
export interface DatabaseHoldings {
  database: string;
  /** Objects under its backup folder (snapshots, segments, indexes, the manifest). */
  objects: number;
  bytes: number;
  /** The oldest and newest object's time (epoch ms). */
  oldest: number;
  newest: number;
  /** Whether it has a manifest: without one, a disaster restore cannot read it. */
  manifest: boolean;
}

/** What the blob store holds: each database's backups, and the offloaded results in all. */
export interface BlobHoldings {
  /** Which store (`folder:/path`, `s3://bucket`). */
  store: string;
  databases: DatabaseHoldings[];
  results: { objects: number; bytes: number; oldest?: number; newest?: number };
}

const BACKUP_KEY = /^backups\/([^/]+)\/([^/]+)\/(.+)$/;

/**
 * Lists the blob store once and sums it per database (`backups/<workspace>/<agent>/…`) and for
 * the offloaded results (`results/…`): what `agentdb backups` shows, and the databases a
 * disaster restore of everything (`restore --from-blob --all`) goes through.
 */
export async function blobHoldings(store: BlobStore): Promise<BlobHoldings> {
  const byDb = new Map<string, DatabaseHoldings>();
  for await (const b of store.list('backups/')) {
    const m = BACKUP_KEY.exec(b.key);
    if (!m) continue;
    const database = m[2] === WORKSPACE_HISTORY ? m[1]! : `${m[1]}/${m[2]}`;
    const at = b.lastModified.getTime();
    const d = byDb.get(database) ?? { database, objects: 0, bytes: 0, oldest: at, newest: at, manifest: false };
    d.objects++;
    d.bytes += b.size;
    d.oldest = Math.min(d.oldest, at);
    d.newest = Math.max(d.newest, at);
    if (m[3] === 'manifest.json') d.manifest = true;
    byDb.set(database, d);
  }
  const results: BlobHoldings['results'] = { objects: 0, bytes: 0 };
  for await (const b of store.list('results/')) {
    const at = b.lastModified.getTime();
    results.objects++;
    results.bytes += b.size;
    results.oldest = Math.min(results.oldest ?? at, at);
    results.newest = Math.max(results.newest ?? at, at);
  }
  return { store: store.name, databases: [...byDb.values()].sort((a, b) => (a.database < b.database ? -1 : 1)), results };
}
