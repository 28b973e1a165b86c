import { readSmall, type BlobStore } from '../blobs/blob-store.ts';
import { readManifest, writeManifest, type BackupManifest } from './backup-manifest.ts';
import { BLOB_READER_TTL_MS } from './blob-restore.ts';

const DAY_MS = 24 * 3600 * 1000;

/** What one blob prune removed. */
export interface BlobPruneReport {
  databases: number;
  generations: number;
  files: number;
  /** Databases left alone because a disaster restore was reading their backups. */
  busy: string[];
}

/**
 * Deletes blob backups older than the retention: a generation goes once a later generation's
 * snapshot is itself at or before the window's start, so the one snapshot that restores inside
 * the window start from is always kept (Litestream's worst reports are restores that failed
 * because retention deleted files beneath them). The manifest is rewritten first, so a reader
 * never finds it naming a file already gone; a database whose backups a restore is reading (a
 * fresh reader marker) is skipped.
 */
export async function pruneBlobBackups(store: BlobStore, opts: { retentionDays: number; now?: number }): Promise<BlobPruneReport> {
  const now = opts.now ?? Date.now();
  const cutoff = now - opts.retentionDays * DAY_MS;
  const report: BlobPruneReport = { databases: 0, generations: 0, files: 0, busy: [] };
  for (const id of await backedUpDatabases(store)) {
    if (await beingRead(store, id, now)) {
      report.busy.push(id);
      continue;
    }
    const manifest = await readManifest(store, id).catch(() => undefined);
    if (!manifest) continue;
    // The newest generation whose snapshot is at or before the cutoff: restores inside the window start there at the earliest.
    let keepFrom = 0;
    manifest.generations.forEach((g, i) => {
      if (g.snapshot.at <= cutoff) keepFrom = i;
    });
    if (keepFrom === 0) continue;
    const gone = manifest.generations.slice(0, keepFrom);
    const kept: BackupManifest = { ...manifest, updatedAt: now, generations: manifest.generations.slice(keepFrom) };
    await writeManifest(store, kept);
    for (const g of gone) {
      for (const f of [g.snapshotFile, ...g.segments.flatMap((s) => [s.data, s.index])]) {
        await store.delete(f.key);
        report.files++;
      }
      report.generations++;
    }
    report.databases++;
  }
  return report;
}

/** The database ids with a manifest in the store. */
async function backedUpDatabases(store: BlobStore): Promise<string[]> {
  const ids: string[] = [];
  for await (const b of store.list('backups/')) {
    const m = /^backups\/([^/]+)\/([^/]+)\/manifest\.json$/.exec(b.key);
    if (m) ids.push(m[2] === '_workspace' ? m[1]! : `${m[1]}/${m[2]}`);
  }
  return ids;
}

async function beingRead(store: BlobStore, id: string, now: number): Promise<boolean> {
  const [workspace, agent] = id.split('/');
  for await (const b of store.list(`backups/${workspace}/${agent ?? '_workspace'}/readers/`)) {
    const at = await readSmall(store, b.key, 4096)
      .then((t) => (JSON.parse(t) as { at: number }).at)
      .catch(() => b.lastModified.getTime());
    if (now - at < BLOB_READER_TTL_MS) return true;
  }
  return false;
}
