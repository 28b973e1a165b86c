import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AgentDbError } from '../errors.ts';
import { Measure, type BlobStore } from '../blobs/blob-store.ts';
import { backupPrefix, manifestRange, readManifest, type ManifestFile } from './backup-manifest.ts';
import {
  GENERATION_END,
  SEGMENTS_DIR,
  SEGMENT_DATA_EXT,
  SEGMENT_INDEX_EXT,
  SNAPSHOT_FILE,
  SNAPSHOT_META,
  nameSeq,
  writeJsonAtomic,
  type HistorySource,
} from './history-files.ts';
import { discardGeneration, everyPage, prepareGeneration, publishGeneration } from './linked-generation.ts';
import { planRestore, type RestorePlan } from './restore-plan.ts';
import { rebuild } from './restore-rebuild.ts';
import { generationLater } from './restore-result.ts';
import { verifyIntegrity } from './integrity.ts';
import { syncDir, syncFile } from './file-sync.ts';

/** What a disaster restore did. */
export interface BlobRestoreResult {
  database: string;
  restoredTo: string;
  snapshot: { id: string; at: string };
  frames: number;
  commits: number;
  /** Bytes downloaded (and verified). */
  downloaded: number;
  /** The database created, when not the one whose backup was read (`--into`). */
  into?: string;
  /** A dry run: nothing was built or created (`downloaded` counts the indexes read). */
  dryRun: boolean;
  /** A dry run for a database that exists here: why the restore itself would be refused. */
  refused?: string;
  /** Restored, but its history could not be begun (see `generationLater`). */
  note?: string;
}

/** A restore reading a database's backups: prune leaves them alone while one is this fresh. */
export const BLOB_READER_TTL_MS = 6 * 3600 * 1000;

/**
 * Rebuilds database `id` at `dbPath` from the blob store alone (a new machine, an empty data
 * folder): the manifest checked against its sha256, the one generation the moment needs
 * downloaded with every file's sha256 checked as it streams, then the history restore engine
 * run on those files (snapshot sha256, every frame's checksum, `PRAGMA quick_check`), and
 * the result put in place only if no database exists there. Any failure leaves nothing behind.
 *
 * `at`: epoch ms; the latest moment backed up when absent. While it runs, a reader marker in the
 * store keeps the blob prune away from this database's backups.
 * @throws AgentDbError NOT_FOUND (no backup of `id`), HISTORY_OUT_OF_RANGE, HISTORY_CORRUPT
 *   (a manifest or file failing its sha256, a bad segment), DATABASE_EXISTS.
 */
export async function restoreFromBlob(
  store: BlobStore,
  opts: {
    id: string;
    dbPath: string;
    workDir: string;
    at?: number;
    now?: number;
    /** The database created at `dbPath`, when not `id` (whose backup is read). */
    into?: string;
    /** Only say what it would restore: the commit indexes are downloaded, nothing is built or created. */
    dryRun?: boolean;
    /**
     * Runs on the checked file before it is put in place (the caller's audit row), with the moment
     * it holds and the restore's time (its row's, which the history's first generation keeps);
     * says which pages it wrote (undefined: it cannot tell, so every page counts).
     */
    beforePlace?: (file: string, restoredTo: number, at: number) => Set<number> | undefined;
    /**
     * The created database's own history, begun as a restore: the downloaded snapshot linked,
     * with what the restore wrote on top of it as its first commit (`linked-generation.ts`).
     * Without it, the first capture snapshots the whole file.
     */
    history?: HistorySource;
    /**
     * Asked, once the restore is planned and before anything is rebuilt or placed, with the bytes
     * it adds to the data disk (`blobRestoreAdds`): throws to refuse it, or for a dry run answers
     * why the restore itself would be refused (the workspace's byte quota, for a fork).
     */
    room?: (bytes: number, dryRun: boolean) => Promise<string | undefined>;
    /**
     * Asked when a database is at `dbPath` already: the moment it holds, when it is this very
     * restore's, made by an earlier run of its op whose answer was lost (the worker killed, or
     * Redis restarted, after the database was placed: BullMQ runs the op again); undefined when
     * it is another's. The restore is then answered, planned again at that moment, not refused.
     */
    madeBefore?: () => Promise<number | undefined>;
    /** A test's view into the restore: called once the database is placed, before its history is published. */
    onPlaced?: () => void;
  },
): Promise<BlobRestoreResult> {
  const { id, dbPath } = opts;
  const made = opts.into ?? id;
  const now = opts.now ?? Date.now();
  // A dry run plans anyway, and says the restore would be refused: previewing a backup is
  // most often done where the database still is.
  const exists = fs.existsSync(dbPath)
    ? `${made} already exists here (${dbPath}); a restore from the blob store only creates a database (give --into ${made.split('/')[0]}/NEW)`
    : undefined;
  const again = exists && opts.dryRun !== true ? await opts.madeBefore?.() : undefined;
  if (exists && opts.dryRun !== true && again === undefined) throw new AgentDbError('DATABASE_EXISTS', exists);
  const prefix = backupPrefix(id);
  const marker = `${prefix}readers/${randomUUID()}.json`;
  await store.put(marker, Readable.from([Buffer.from(JSON.stringify({ at: now, pid: process.pid }))]));
  const work = path.join(opts.workDir, `blob-restore-${randomUUID()}`);
  try {
    const manifest = await readManifest(store, id);
    if (!manifest || manifest.generations.length === 0) {
      throw new AgentDbError(
        'NOT_FOUND',
        `the worker's blob store ${store.name} has no backup of ${id} (on a new machine, start the worker with BLOB_DIR, or the S3 settings, pointing at the store the backups went to: the worker reads the store, not this command)`,
      );
    }
    const range = manifestRange(manifest);
    const at = again ?? opts.at ?? range.latest!;
    if (at > now) throw new AgentDbError('HISTORY_OUT_OF_RANGE', `${new Date(at).toISOString()} is in the future`);
    const gen = manifest.generations.filter((g) => g.snapshot.at <= at).at(-1);
    if (!gen) {
      throw new AgentDbError(
        'HISTORY_OUT_OF_RANGE',
        `${new Date(at).toISOString()} is before the earliest backed-up moment, ${new Date(range.earliest!).toISOString()}`,
      );
    }
    // The generation in the layout the restore engine reads (see history-files.ts).
    const genDir = path.join(work, 'generations', gen.name);
    fs.mkdirSync(path.join(genDir, SEGMENTS_DIR), { recursive: true });
    // Made already (`madeBefore`): planned as a dry run, to answer what was restored.
    const dry = opts.dryRun === true || again !== undefined;
    let downloaded = dry ? 0 : await download(store, gen.snapshotFile, path.join(genDir, SNAPSHOT_FILE));
    writeJsonAtomic(path.join(genDir, SNAPSHOT_META), gen.snapshot);
    if (gen.end) writeJsonAtomic(path.join(genDir, GENERATION_END), gen.end);
    for (const seg of gen.segments) {
      if (seg.from > at) break;
      // A dry run plans from the indexes alone: the frames' file only names the segment then.
      const data = path.join(genDir, SEGMENTS_DIR, seg.name + SEGMENT_DATA_EXT);
      if (dry) fs.writeFileSync(data, '');
      else downloaded += await download(store, seg.data, data);
      downloaded += await download(store, seg.index, path.join(genDir, SEGMENTS_DIR, seg.name + SEGMENT_INDEX_EXT));
    }
    // A gap that lost commits after this generation's last (SnapshotMeta.lost): its meta alone,
    // so the plan refuses the stretch as a local restore does. Only when every segment of the
    // generation is here: the plan takes the last one's last commit for where the stretch begins.
    const next = manifest.generations[manifest.generations.indexOf(gen) + 1];
    if (next?.snapshot.lost && !gen.segments.some((seg) => seg.from > at)) {
      fs.mkdirSync(path.join(work, 'generations', next.name), { recursive: true });
      writeJsonAtomic(path.join(work, 'generations', next.name, SNAPSHOT_META), next.snapshot);
    }
    const plan = planRestore({ generationsDir: path.join(work, 'generations') }, { at });
    const roomRefusal = again === undefined ? await opts.room?.(blobRestoreAdds(plan), dry) : undefined;
    const answer: BlobRestoreResult = {
      database: id,
      restoredTo: new Date(plan.restoredTo).toISOString(),
      snapshot: { id: plan.snapshot.id, at: new Date(plan.snapshot.at).toISOString() },
      frames: plan.frames,
      commits: plan.commits,
      downloaded,
      ...(opts.into !== undefined ? { into: opts.into } : {}),
      dryRun: opts.dryRun === true,
      ...(opts.dryRun === true && (exists || roomRefusal) ? { refused: exists ? `DATABASE_EXISTS: ${exists}` : roomRefusal } : {}),
    };
    if (dry) return answer;
    const built = path.join(work, 'restored.sqlite');
    const rebuilt = rebuild(plan, built, { flushAsWritten: true });
    verifyIntegrity(built);
    const began = Date.now();
    const audited = opts.beforePlace?.(built, plan.restoredTo, began);
    syncFile(built);
    const written = opts.beforePlace && !audited ? everyPage(built, plan.snapshot.pageSize) : new Set([...rebuilt.written, ...(audited ?? [])]);
    // Numbered after every generation the blob store has of the database it creates: begun again
    // at g…1 here, its backups took its generations for the old machine's of the same names, and
    // uploaded none of them ("unchanged").
    const backedUp = opts.into === undefined ? manifest : await readManifest(store, made).catch(() => undefined);
    const above = Math.max(0, ...(backedUp?.generations ?? []).map((g) => nameSeq(g.name) ?? 0));
    let prepared = opts.history ? prepareGeneration(opts.history, plan, built, written, above) : undefined;
    try {
      fs.mkdirSync(path.dirname(dbPath), { recursive: true });
      // A link never replaces: a database created here meanwhile (a call) is left alone.
      try {
        fs.linkSync(built, dbPath);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST')
          throw new AgentDbError('DATABASE_EXISTS', `${made} was created while it was being restored; nothing was changed`);
        throw err;
      }
      // The second name goes before the seal is written: removing a link moves the file's change time.
      fs.rmSync(built, { force: true });
      syncDir(path.dirname(dbPath));
      opts.onPlaced?.();
      // Placed: a history that cannot begin (its disk full) is a note, and the database's next
      // open snapshots it. Thrown, the restore was answered failed with the database there (F17).
      try {
        if (prepared) publishGeneration(prepared, dbPath, 'restore', Date.now(), began);
        prepared = undefined;
      } catch (err) {
        return { ...answer, note: generationLater(made, err) };
      }
    } finally {
      discardGeneration(prepared);
    }
    return answer;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
    await store.delete(marker).catch(() => undefined);
  }
}

/** Downloads one file, checking its size and sha256 against the manifest as it streams. */
async function download(store: BlobStore, f: ManifestFile, to: string): Promise<number> {
  const measure = new Measure();
  const body = await store.get(f.key).catch((err) => {
    if ((err as AgentDbError).code === 'NOT_FOUND')
      throw new AgentDbError('HISTORY_CORRUPT', `${store.name}/${f.key}, which the manifest names, is missing; nothing was restored`);
    throw err;
  });
  await pipeline(body, measure, createWriteStream(to));
  if (measure.sha256() !== f.sha256 || measure.bytes !== f.bytes) {
    throw new AgentDbError(
      'HISTORY_CORRUPT',
      `${store.name}/${f.key} does not match the sha256 its manifest names (${measure.sha256()} ≠ ${f.sha256}); nothing was restored`,
    );
  }
  return measure.bytes;
}

/**
 * What a restore from the blob store adds to the data disk: the database's file (the moment's
 * size), its history's snapshot (the downloaded one, linked in) and its base commit (at most the
 * moment's size again). Weighed before the rebuild: a fork from the blob store was checked only
 * for the databases it adds and a workspace already past its bytes (review L2).
 */
export function blobRestoreAdds(plan: Pick<RestorePlan, 'dbPages' | 'snapshot'>): number {
  return 2 * plan.dbPages * plan.snapshot.pageSize + plan.snapshot.pages * plan.snapshot.pageSize;
}
