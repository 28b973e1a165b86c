import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { AgentDbError } from '../errors.ts';
import { readSmall, type BlobStore } from '../blobs/blob-store.ts';
import { WORKSPACE_HISTORY, type GenerationEnd, type SnapshotMeta } from './history-files.ts';

/** One uploaded file, as its manifest vouches for it. */
export interface ManifestFile {
  key: string;
  sha256: string;
  bytes: number;
}

/** One closed segment in the blob store: its frames, its commit index, and the time it spans. */
export interface ManifestSegment {
  name: string;
  data: ManifestFile;
  index: ManifestFile;
  commits: number;
  /** Commit times (epoch ms) of its first and last commit. */
  from: number;
  to: number;
}

/** One generation in the blob store: its snapshot and the closed segments uploaded so far. */
export interface ManifestGeneration {
  name: string;
  /** The snapshot's own record (time, sha256, size, page size and count), as capture wrote it. */
  snapshot: SnapshotMeta;
  snapshotFile: ManifestFile;
  end?: GenerationEnd;
  segments: ManifestSegment[];
}

/**
 * What the blob store holds of one database's history: every file with its sha256 and size,
 * per generation, so a disaster restore can verify each download before using it. Kept at
 * `backups/<workspace>/<agent | _workspace>/manifest.json`, with its own sha256 beside it
 * (`manifest.sha256`), so a damaged manifest is found before anything trusts it.
 */
export interface BackupManifest {
  version: 1;
  database: string;
  updatedAt: number;
  generations: ManifestGeneration[];
}

/** The folder of database `id`'s backups in the blob store. */
export function backupPrefix(id: string): string {
  const [workspace, agent] = id.split('/');
  return `backups/${workspace}/${agent ?? WORKSPACE_HISTORY}/`;
}

/** The restorable range a manifest covers: the oldest snapshot to the last commit uploaded. */
export function manifestRange(m: BackupManifest): { earliest?: number; latest?: number } {
  const gens = m.generations;
  if (gens.length === 0) return {};
  let latest = 0;
  for (const g of gens) latest = Math.max(latest, g.snapshot.at, ...g.segments.map((s) => s.to));
  return { earliest: gens[0]!.snapshot.at, latest };
}

/** Writes the manifest, then its sha256: a reader that finds the two disagreeing refuses both. */
export async function writeManifest(store: BlobStore, m: BackupManifest): Promise<void> {
  const text = Buffer.from(JSON.stringify(m, null, 1));
  const prefix = backupPrefix(m.database);
  await store.put(`${prefix}manifest.json`, Readable.from([text]));
  await store.put(`${prefix}manifest.sha256`, Readable.from([Buffer.from(createHash('sha256').update(text).digest('hex'))]));
}

/**
 * The manifest of database `id`, checked against its sha256, or undefined when it has none.
 * @throws AgentDbError HISTORY_CORRUPT when the manifest does not match its sha256 or is not one.
 */
export async function readManifest(store: BlobStore, id: string): Promise<BackupManifest | undefined> {
  const prefix = backupPrefix(id);
  let text: string;
  try {
    text = await readSmall(store, `${prefix}manifest.json`, 256 * 1024 * 1024);
  } catch (err) {
    if ((err as AgentDbError).code === 'NOT_FOUND') return undefined;
    throw err;
  }
  const want = (await readSmall(store, `${prefix}manifest.sha256`, 1024).catch(() => '')).trim();
  const got = createHash('sha256').update(text, 'utf8').digest('hex');
  if (want !== got)
    throw new AgentDbError('HISTORY_CORRUPT', `the backup manifest ${prefix}manifest.json does not match its sha256 (${got} ≠ ${want || 'none'})`);
  let m: BackupManifest;
  try {
    m = JSON.parse(text) as BackupManifest;
  } catch {
    throw new AgentDbError('HISTORY_CORRUPT', `the backup manifest ${prefix}manifest.json is not JSON`);
  }
  if (m.version !== 1 || m.database !== id || !Array.isArray(m.generations)) {
    throw new AgentDbError('HISTORY_CORRUPT', `the backup manifest ${prefix}manifest.json is not a manifest of ${id}`);
  }
  return m;
}
