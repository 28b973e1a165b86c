import { AgentDbError, type ErrorCode } from '../errors.ts';
import { readBackSha256, type BlobStore } from '../blobs/blob-store.ts';
import { backupPrefix, readManifest, writeManifest, type BackupManifest, type ManifestFile, type ManifestGeneration } from './backup-manifest.ts';
import { listGenerations, listSegments, localSource } from './history-files.ts';
import { readIndex } from './segment-index.ts';
import { frameBatches } from './frame-scan.ts';

/** What one database's backup did. */
export interface BackupReport {
  database: string;
  /** Files uploaded (and verified) this time. */
  files: number;
  bytes: number;
  /** Nothing new since the last backup: nothing was uploaded. */
  unchanged: boolean;
  /** Set when this database's backup failed (the others went on); what it uploaded before is kept. */
  error?: { code: ErrorCode; detail: string };
  /**
   * Segments left out, never uploaded, because their index is damaged (`readIndex`) or their
   * frames fail their checksums, with the rest of their generation, which restores could not
   * reach past them anyway; every other generation is backed up.
   */
  damaged?: string[];
  /**
   * Why the fresh snapshot a backup begins with was not taken (a full disk, a restore reading the
   * history): the closed segments went up, but not the commits since the last one closed, which
   * only that snapshot would have closed. Reported, not silent: a backup on a full data disk
   * answered `unchanged` and exited 0 while its last stretch of commits was in no backup (review F2).
   */
  snapshot?: { code: ErrorCode; detail: string };
}

/**
 * Copies what the blob store lacks of database `id`'s local history: each generation's snapshot
 * and each closed segment (with its commit index), each verified by reading it back and
 * comparing sha256s, then the manifest naming them all. Snapshots and closed segments never
 * change, so what a manifest lists is never uploaded again; the segment capture still appends
 * to waits for the next backup (the nightly run first starts a new generation, which closes it).
 *
 * A manifest that fails its own check is not trusted: everything is uploaded afresh.
 * @throws AgentDbError HISTORY_CORRUPT when a local snapshot no longer matches its sha256, the
 *   store holds another generation under a local one's name (nothing is uploaded then), or
 *   an upload reads back different bytes (the manifest keeps only what was verified).
 */
export async function backupDatabase(store: BlobStore, dataDir: string, id: string, now = Date.now()): Promise<BackupReport> {
  const prefix = backupPrefix(id);
  const manifest: BackupManifest = (await readManifest(store, id).catch(() => undefined)) ?? { version: 1, database: id, updatedAt: now, generations: [] };
  const known = new Map(manifest.generations.map((g) => [g.name, g]));
  const report: BackupReport = { database: id, files: 0, bytes: 0, unchanged: true };
  const upload = async (key: string, file: string, expectSha?: string): Promise<ManifestFile> => {
    const put = await store.put(key, { file });
    if (expectSha && put.sha256 !== expectSha)
      throw new AgentDbError('HISTORY_CORRUPT', `local file ${file} does not match its sha256 (${put.sha256} ≠ ${expectSha}); not backed up`);
    const back = await readBackSha256(store, key);
    if (back.sha256 !== put.sha256 || back.size !== put.size) {
      throw new AgentDbError('HISTORY_CORRUPT', `${store.name}/${key} read back differs from what was uploaded (${back.sha256} ≠ ${put.sha256})`);
    }
    report.files++;
    report.bytes += put.size;
    return { key, sha256: put.sha256, bytes: put.size };
  };

  const generations = listGenerations(localSource(dataDir, id));
  // A name the blob store has for another generation (history begun again here under names the
  // store already holds): taking it for this one would back up none of it, silently. Looked for
  // before anything is uploaded.
  for (const gen of generations) {
    const entry = gen.snapshot && known.get(gen.name);
    if (entry && (entry.snapshot.sha256 !== gen.snapshot!.sha256 || entry.snapshot.at !== gen.snapshot!.at)) {
      throw new AgentDbError(
        'BACKUP_CONFLICT',
        `${store.name} holds a generation ${gen.name} of ${id} that is not this one (its snapshot of ${new Date(entry.snapshot.at).toISOString()}, here ${new Date(gen.snapshot!.at).toISOString()}): another deployment restored ${id} from these backups and backed it up since, or the history here was begun again under names already backed up; nothing of ${id} was backed up — if this deployment is the one to keep, move the store's backups of it (${prefix}) aside and back up again`,
      );
    }
  }
  for (const gen of generations) {
    if (!gen.snapshot) continue;
    let entry = known.get(gen.name);
    if (!entry) {
      const snapshotFile = await upload(`${prefix}${gen.name}/snapshot.sqlite`, gen.snapshotPath, gen.snapshot.sha256);
      entry = { name: gen.name, snapshot: gen.snapshot, snapshotFile, segments: [] } satisfies ManifestGeneration;
      known.set(gen.name, entry);
      manifest.generations.push(entry);
      report.unchanged = false;
    }
    if (gen.end && !entry.end) {
      entry.end = gen.end;
      report.unchanged = false;
    }
    const have = new Set(entry.segments.map((s) => s.name));
    for (const seg of listSegments(gen)) {
      if (!seg.closed || have.has(seg.name)) continue;
      const read = readIndex(seg.indexPath);
      const damaged = read.damaged ?? (read.tail === 'torn' ? 'a torn last line' : undefined);
      if (damaged) {
        (report.damaged ??= []).push(`${gen.name}/${seg.name}: ${damaged}`);
        break;
      }
      const commits = read.commits;
      // An empty segment (a WAL reset before any commit) restores nothing.
      if (commits.length === 0) continue;
      // Every frame checked against the segment's salts and checksum chain before it goes: a
      // segment torn by a full disk was uploaded and called verified, and every restore from
      // the blob store past it failed (issue 25). The read-back below only proves the copy.
      const torn = framesProblem(gen.name, seg.name, seg.dataPath, commits.at(-1)!.frames, gen.snapshot.pageSize);
      if (torn) {
        (report.damaged ??= []).push(`${gen.name}/${seg.name}: ${torn}`);
        break;
      }
      const data = await upload(`${prefix}${gen.name}/${seg.name}.wal`, seg.dataPath);
      const index = await upload(`${prefix}${gen.name}/${seg.name}.idx`, seg.indexPath);
      entry.segments.push({ name: seg.name, data, index, commits: commits.length, from: commits[0]!.at, to: commits.at(-1)!.at });
      report.unchanged = false;
    }
    entry.segments.sort((a, b) => (a.name < b.name ? -1 : 1));
  }
  if (!report.unchanged) {
    manifest.generations.sort((a, b) => (a.name < b.name ? -1 : 1));
    manifest.updatedAt = now;
    await writeManifest(store, manifest);
  }
  return report;
}

/** Why a segment's frames 1…`frames` do not check out (see `frameBatches`), or undefined when they do. */
function framesProblem(generation: string, name: string, file: string, frames: number, pageSize: number): string | undefined {
  try {
    for (const _batch of frameBatches(generation, name, file, frames, pageSize)) {
      // Checked as each batch is read.
    }
    return undefined;
  } catch (err) {
    return (err as { detail?: string }).detail ?? String(err);
  }
}
