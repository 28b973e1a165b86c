import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import {
  listGenerations,
  listSegments,
  type CommitRecord,
  type GenerationInfo,
  type HistoryPosition,
  type HistorySource,
  type SnapshotMeta,
} from './history-files.ts';
import { readCommits } from './segment-index.ts';
import { syncBehind, type SyncBehind } from './sync-behind.ts';
import { frameBatches } from './frame-scan.ts';
import { copyWithSha256 } from './snapshot.ts';
import { chunkSumsOnThread } from './hash-worker.ts';
import { CRC_CHUNK, SNAPSHOT_CRC, checkChunks, copyPrefixChecked, readSnapshotCrc, sameSums } from './snapshot-crc.ts';
import { FRAME_HEADER_BYTES, frameOffset } from './wal-format.ts';
import { verifyIntegrity } from './integrity.ts';

/** Where a restore goes: a moment (epoch ms: every commit at or before it), or an exact commit. */
export type RestoreTarget = { at: number } | { position: HistoryPosition };

/** What a restore will do: which snapshot, then which frames of which segments. */
export interface RestorePlan {
  generation: string;
  snapshot: SnapshotMeta;
  snapshotPath: string;
  segments: { dataPath: string; name: string; frames: number }[];
  /** Frames applied on top of the snapshot, and the commits they make (a base commit is not one). */
  frames: number;
  commits: number;
  /** The time of the last commit applied (the snapshot's when none). */
  restoredTo: number;
  /** The database's size in pages then (the last commit's, or the snapshot's). */
  dbPages: number;
}

/** The restorable range of a history: from the oldest snapshot to the last commit. */
export function historyRange(source: HistorySource): { earliest?: number; latest?: number } {
  const gens = listGenerations(source).filter((g) => g.snapshot);
  if (gens.length === 0) return {};
  const earliest = gens[0]!.snapshot!.at;
  const last = gens.at(-1)!;
  let latest = last.snapshot!.at;
  for (const seg of listSegments(last)) {
    const c = readCommits(seg.indexPath, seg.closed).at(-1);
    if (c) latest = Math.max(latest, c.at);
  }
  return { earliest, latest };
}

/**
 * Plans a restore from `source`: the newest snapshot at or before the moment, then the commits
 * after it up to the moment (or up to an exact position, for an undo).
 * @throws AgentDbError HISTORY_OUT_OF_RANGE when the history has nothing at that moment.
 */
export function planRestore(source: HistorySource, target: RestoreTarget): RestorePlan {
  const gens = listGenerations(source).filter((g) => g.snapshot);
  if (gens.length === 0) throw new AgentDbError('HISTORY_OUT_OF_RANGE', 'this database has no history yet');
  let gen: GenerationInfo | undefined;
  if ('at' in target) {
    gen = gens.filter((g) => g.snapshot!.at <= target.at).at(-1);
    if (!gen) {
      throw new AgentDbError(
        'HISTORY_OUT_OF_RANGE',
        `${new Date(target.at).toISOString()} is before the history's earliest moment, ${new Date(gens[0]!.snapshot!.at).toISOString()}`,
      );
    }
  } else {
    gen = gens.find((g) => g.name === target.position.generation);
    if (!gen) throw new AgentDbError('HISTORY_OUT_OF_RANGE', `generation ${target.position.generation} is no longer in the history (pruned)`);
  }
  const next = gens[gens.indexOf(gen) + 1];
  let whole = true;
  const plan: RestorePlan = {
    generation: gen.name,
    snapshot: gen.snapshot!,
    snapshotPath: gen.snapshotPath,
    segments: [],
    frames: 0,
    commits: 0,
    restoredTo: gen.snapshot!.at,
    dbPages: gen.snapshot!.pages,
  };
  for (const seg of listSegments(gen)) {
    const commits = readCommits(seg.indexPath, seg.closed);
    // A WAL that started over and was reset again before any commit leaves an empty segment.
    if (commits.length === 0) continue;
    let take: CommitRecord | undefined;
    let n = 0;
    if ('at' in target) {
      for (const c of commits) {
        if (c.at > target.at) break;
        take = c;
        n++;
      }
    } else if (seg.name < target.position.segment) {
      take = commits.at(-1);
      n = commits.length;
    } else if (seg.name === target.position.segment) {
      for (const c of commits) {
        if (c.frames > target.position.frames) break;
        take = c;
        n++;
      }
    }
    if (take) {
      plan.segments.push({ dataPath: seg.dataPath, name: seg.name, frames: take.frames });
      plan.frames += take.frames;
      // A restore's generation begins with its base commit (`SnapshotMeta.base`): its starting
      // state, not a commit made in it (the history view and an undo's count leave it out too).
      plan.commits += n - (gen.snapshot!.base?.segment === seg.name ? 1 : 0);
      plan.restoredTo = take.at;
      plan.dbPages = take.dbPages;
    }
    // A segment not taken whole ends the plan: later ones come after the moment.
    if (!take || take !== commits.at(-1)) {
      whole = false;
      break;
    }
    if (!('at' in target) && seg.name === target.position.segment) break;
    // Gone past: its last line must be its last commit. A closed segment's frames end where its
    // index does (capture cuts a crash's leftovers before the segment closes); more frames mean
    // a line is missing from the end of its index, and going on would skip that commit.
    if (seg.closed && (fs.statSync(seg.dataPath, { throwIfNoEntry: false })?.size ?? 0) > frameOffset(plan.snapshot.pageSize, take.frames + 1)) {
      throw new AgentDbError(
        'HISTORY_CORRUPT',
        `history segment ${seg.dataPath} holds frames past the last commit its index names (${seg.indexPath} lost its last line); restore to a moment before its last commit, or after the generation that followed`,
      );
    }
  }
  // Past the last commit this generation holds, and a gap generation follows: commits may have
  // been made in between that history never got (folded into the file behind capture's back),
  // so the state there is unknown. Answering with this generation's last state would leave
  // acknowledged writes out, silently (issue 25): refused, naming the stretch.
  if ('at' in target && whole && next?.snapshot?.reason === 'gap' && next.snapshot.lost && target.at > plan.restoredTo) {
    throw new AgentDbError(
      'HISTORY_LOST',
      `${new Date(target.at).toISOString()} is in a stretch of history that was lost: after ${new Date(plan.restoredTo).toISOString()}, the last commit ${gen.name} holds, and before ${new Date(next.snapshot.at).toISOString()}, when ${next.name} began from the file (a gap); restore to a moment outside it`,
    );
  }
  return plan;
}

/** A stretch of time whose commits history does not hold: from the last commit before a gap generation to its snapshot. */
export interface LostStretch {
  /** The last commit history holds before it (or the previous generation's snapshot), epoch ms. */
  after: number;
  /** The gap generation's snapshot, epoch ms: from then on history holds everything again. */
  before: number;
  /** The gap generation. */
  generation: string;
}

/**
 * Every lost stretch of a history (see {@link planRestore}): one before each `gap` generation
 * that lost commits (`SnapshotMeta.lost`).
 * Reads the indexes leniently (a damaged line ends what counts), since it only lists.
 */
export function lostStretches(gens: readonly GenerationInfo[], lastCommitAt: (g: GenerationInfo) => number): LostStretch[] {
  const out: LostStretch[] = [];
  for (let i = 1; i < gens.length; i++) {
    const g = gens[i]!;
    const prev = gens[i - 1]!;
    if (g.snapshot?.reason !== 'gap' || !g.snapshot.lost || !prev.snapshot) continue;
    out.push({ after: lastCommitAt(prev), before: g.snapshot.at, generation: g.name });
  }
  return out;
}

/**
 * Builds the database a plan describes at `outPath` (which must not be the live file): the
 * snapshot, checked against its sha256, then each frame's page written in order, each segment
 * checked frame by frame against its salts and cumulative checksums, the file cut to the last
 * commit's size, and the result checked with `PRAGMA quick_check` unless it is sound by
 * construction (`Rebuilt.sound`). Works on any folder of generations.
 * @throws AgentDbError HISTORY_CORRUPT naming the file that failed; `outPath` is removed then.
 */
export function buildRestore(plan: RestorePlan, outPath: string): void {
  const built = rebuild(plan, outPath);
  try {
    if (!built.sound) verifyIntegrity(outPath);
  } catch (err) {
    fs.rmSync(outPath, { force: true });
    throw err;
  }
}

/**
 * {@link buildRestore} without its `PRAGMA quick_check`: for a restore that adds its audit row
 * first and must check the file (unless `sound`) before anything takes its bytes for a database.
 * `flushAsWritten`: the file is about to be fsynced, so it is flushed on another thread as it is
 * written (`syncBehind`).
 * @throws AgentDbError HISTORY_CORRUPT naming the file that failed; `outPath` is removed then.
 */
export function rebuild(plan: RestorePlan, outPath: string, opts: { flushAsWritten?: boolean } = {}): Rebuilt {
  // The file is made first, so that the flushing thread and the copy below hold the same one.
  let flushing: SyncBehind | undefined;
  if (opts.flushAsWritten) {
    fs.writeFileSync(outPath, '');
    flushing = syncBehind(outPath);
  }
  try {
    // Hashing 100 MB costs three times copying it: a snapshot unchanged since its sha256 was
    // computed (same size and mtime) is copied by the kernel; any other is hashed as it is copied.
    const stat = fs.statSync(plan.snapshotPath, { throwIfNoEntry: false });
    if (!stat) throw new AgentDbError('HISTORY_CORRUPT', `snapshot ${plan.generation} is missing`);
    const v = plan.snapshot.verified;
    // Whether every byte copied was checked against the snapshot's checksums or sha256.
    let held = false;
    if (v && v.size === stat.size && v.mtimeMs === stat.mtimeMs) {
      // Size and time stay put when a byte rots in place: the snapshot is held to its chunk
      // checksums, computed on the other core while the kernel copies it.
      const sums = readSnapshotCrc(path.join(path.dirname(plan.snapshotPath), SNAPSHOT_CRC), stat.size);
      const keep = plan.dbPages * plan.snapshot.pageSize;
      if (sums && keep < stat.size) {
        // The database was smaller then: only what it kept is copied (and checked as it is),
        // where cutting a whole copy afterwards made ext4 flush it all (see below).
        copyPrefixChecked(plan.snapshotPath, outPath, keep, sums, `snapshot ${plan.generation}`);
        held = true;
      } else {
        const checking = sums && chunkSumsOnThread(plan.snapshotPath, CRC_CHUNK);
        fs.copyFileSync(plan.snapshotPath, outPath);
        if (sums) {
          let got: number[] | undefined;
          try {
            got = checking!.result();
          } catch {
            got = undefined;
          }
          if (got) sameSums(got, sums, `snapshot ${plan.generation}`);
          else checkChunks(outPath, sums, 'all', `snapshot ${plan.generation}`);
          held = true;
        }
      }
    } else {
      const { sha256 } = copyWithSha256(plan.snapshotPath, outPath);
      if (sha256 !== plan.snapshot.sha256)
        throw new AgentDbError('HISTORY_CORRUPT', `snapshot ${plan.generation} does not match its sha256 (${sha256} ≠ ${plan.snapshot.sha256})`);
      held = true;
    }
    const out = fs.openSync(outPath, 'r+');
    let dbPages = plan.snapshot.pages;
    const written = new Set<number>();
    try {
      for (const seg of plan.segments) dbPages = applySegment(out, plan.generation, seg, plan.snapshot.pageSize, written, plan.dbPages) ?? dbPages;
      // No fsync here: a restore checks and syncs the file before it is used. Cut only when the
      // size differs: ext4 flushes a file's delayed writes on any truncate (auto_da_alloc).
      const bytes = dbPages * plan.snapshot.pageSize;
      if (fs.fstatSync(out).size !== bytes) fs.ftruncateSync(out, bytes);
    } finally {
      fs.closeSync(out);
    }
    return { written, dbPages, sound: held && plan.snapshot.checked === true };
  } catch (err) {
    flushing?.stop();
    fs.rmSync(outPath, { force: true });
    throw err;
  } finally {
    flushing?.stop();
  }
}

/** What {@link rebuild} made: the pages it wrote over the snapshot's, and the file's size in pages. */
export interface Rebuilt {
  written: Set<number>;
  dbPages: number;
  /**
   * The snapshot passed `PRAGMA quick_check` when it was made (`SnapshotMeta.checked`) and
   * every byte copied from it was held to its checksums: the file is then the database exactly
   * as SQLite committed it, and needs no check of its own (see `integrity.ts`).
   */
  sound: boolean;
}

function applySegment(
  out: number,
  generation: string,
  seg: RestorePlan['segments'][number],
  pageSize: number,
  written: Set<number>,
  finalPages: number,
): number | undefined {
  let dbPages: number | undefined;
  // Consecutive pages are written with one call (a fill writes them as consecutive frames): one
  // write per page was 12,800 system calls for 50 MB.
  const run: Buffer[] = [];
  let runFirst = 0;
  const flush = () => {
    if (run.length === 0) return;
    const wrote = run.length === 1 ? fs.writeSync(out, run[0]!, 0, pageSize, (runFirst - 1) * pageSize) : fs.writevSync(out, run, (runFirst - 1) * pageSize);
    // writev writes nothing, without an error, from memory detached since (a scan growing the
    // WebAssembly memory the pages are in): loud, not a file with holes.
    // A short write is a full disk (write(2) takes what fits): answered STORAGE_FULL, retryable.
    if (wrote !== run.length * pageSize) throw new AgentDbError('STORAGE_FULL', `restore wrote ${wrote} of ${run.length * pageSize} bytes at page ${runFirst}`);
    run.length = 0;
  };
  for (const batch of frameBatches(generation, seg.name, seg.dataPath, seg.frames, pageSize)) {
    const { buf, frameBytes: fb } = batch;
    for (let i = 0; i < batch.count; i++) {
      const pgno = buf.readUInt32BE(i * fb);
      const commit = buf.readUInt32BE(i * fb + 4);
      // A page past the size the database ends at would only be cut off again.
      if (pgno <= finalPages) {
        if (run.length && (pgno !== runFirst + run.length || run.length === MAX_RUN)) flush();
        if (!run.length) runFirst = pgno;
        run.push(buf.subarray(i * fb + FRAME_HEADER_BYTES, i * fb + FRAME_HEADER_BYTES + pageSize));
        written.add(pgno);
      }
      if (commit > 0) dbPages = commit;
    }
    // The batch's memory is read into again for the next.
    flush();
  }
  return dbPages;
}

/** Pages written by one call of {@link applySegment} at most (the system's limit on buffers per write is 1024). */
const MAX_RUN = 512;
