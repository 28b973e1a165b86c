import fs from 'node:fs';
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
import { frameOffset } from './wal-format.ts';

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
  /** The history position of the state restored: the last commit applied (`<generation>.<segment>.<n>`), or the generation's first. */
  state: string;
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
    state: gen.name,
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
      plan.state = `${gen.name}.${seg.name}.${n - 1}`;
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
  // The generation's own snapshot is known too: one taken after its last commit (a manual or
  // nightly snapshot) holds the file as it was then, and the lost commits came after it.
  const known = Math.max(plan.restoredTo, gen.snapshot?.at ?? 0);
  if ('at' in target && whole && next?.snapshot?.reason === 'gap' && next.snapshot.lost && target.at > known) {
    throw new AgentDbError(
      'HISTORY_LOST',
      `${new Date(target.at).toISOString()} is in a stretch of history that was lost: after ${new Date(known).toISOString()}, the last state ${gen.name} holds, and before ${new Date(next.snapshot.at).toISOString()}, when ${next.name} began from the file (a gap); restore to a moment outside it`,
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
    out.push({ after: Math.max(lastCommitAt(prev), prev.snapshot.at), before: g.snapshot.at, generation: g.name });
  }
  return out;
}
