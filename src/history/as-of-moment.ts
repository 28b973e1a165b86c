import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { CALLS_TABLE } from '../sqlite/call-record.ts';
import { trusted } from '../sqlite/sqlite-trusted.ts';
import { frameBatches } from './frame-scan.ts';
import { listGenerations, listSegments, type GenerationInfo, type HistoryPosition, type HistorySource, type SegmentInfo } from './history-files.ts';
import { planRestore, type RestorePlan } from './restore-plan.ts';
import { readCommits } from './segment-index.ts';
import { FRAME_HEADER_BYTES } from './wal-format.ts';

const DAY_MS = 24 * 3600 * 1000;

/**
 * A past moment of one database, as a read's `as_of` names it once the worker has checked it:
 * a time (epoch ms), or the call whose write it is just before. `callKeys`: the exactly-once
 * keys that call may have written under (see `callKey`: the caller's, and the database owner's
 * when another agent reads it); `callId`: the id as the caller gave it, for messages.
 */
export type AsOfTarget = { at: number } | { callId: string; callKeys: string[] };

/**
 * The restore plan of the moment `target` names in `source`, planned by the restore's own
 * `planRestore` so that a read of the past sees exactly what a fork restored there would hold.
 * `live` is the database now (where a call's exactly-once record says when it ran).
 * @throws AgentDbError HISTORY_OUT_OF_RANGE naming the earliest moment kept (a time before it or
 * in the future, a call older than it, or whose write is in the snapshot history begins with),
 * HISTORY_LOST (a moment lost, or a call whose write is inside a later generation's snapshot),
 * AS_OF_CALL_UNKNOWN (a call that wrote nothing to this database that its record still holds),
 * HISTORY_BEHIND (a call whose write history has not captured yet).
 */
export function planAsOf(source: HistorySource, live: Database | undefined, target: AsOfTarget, retentionDays: number, now = Date.now()): RestorePlan {
  const gens = listGenerations(source).filter((g) => g.snapshot);
  if (gens.length === 0) throw new AgentDbError('HISTORY_OUT_OF_RANGE', 'this database has no history yet (it was never written)');
  const earliest = Math.max(gens[0]!.snapshot!.at, now - retentionDays * DAY_MS);
  const range = `its history runs from ${iso(earliest)} to now`;
  if ('at' in target) {
    if (target.at > now) throw new AgentDbError('HISTORY_OUT_OF_RANGE', `as_of ${iso(target.at)} is in the future; ${range}`);
    if (target.at < earliest)
      throw new AgentDbError('HISTORY_OUT_OF_RANGE', `as_of ${iso(target.at)} is before the earliest moment kept, ${iso(earliest)}; ${range}`);
    return planRestore(source, { at: target.at });
  }
  const ran = live ? recordedAt(live, target.callKeys) : undefined;
  if (!ran) {
    throw new AgentDbError(
      'AS_OF_CALL_UNKNOWN',
      `call ${JSON.stringify(target.callId)} made no write to this database that it still records (a call's record is kept 7 days, and goes with an undone restore's writes though activity still lists them); give an ISO time instead (a millisecond before the activity entry's at reads just before that write)`,
    );
  }
  if (ran.at < earliest)
    throw new AgentDbError(
      'HISTORY_OUT_OF_RANGE',
      `call ${JSON.stringify(target.callId)} ran at ${iso(ran.at)}, before the earliest moment kept, ${iso(earliest)}`,
    );
  const found = positionBefore(source, ran.key, ran.at);
  if (!found) {
    // Acknowledged (its record is in the database) but in no commit history holds: capture is
    // behind (its copies failing, the frames waiting in the WAL), and catches up by itself.
    throw new AgentDbError(
      'HISTORY_BEHIND',
      `call ${JSON.stringify(target.callId)} wrote to this database, but its history has not captured that write yet; try again shortly`,
    );
  }
  if ('folded' in found) throw foldedRefusal(target.callId, found.folded);
  return planRestore(source, { position: found.position });
}

/**
 * Why the moment just before a call's write cannot be shown: the write reached history only
 * inside a generation's snapshot (after a gap, a fork's or restore's copied file, the first
 * writes, a snapshot that folded in commits it could not copy), never as a commit of its own.
 * Answering the snapshot would be the state after the write, as if before it.
 */
function foldedRefusal(callId: string, folded: Folded): AgentDbError {
  const snap = folded.gen.snapshot!;
  const after = `${iso(snap.at)} (the state just after it, with whatever else that snapshot holds)`;
  const why = `the write of call ${JSON.stringify(callId)} is inside the snapshot generation ${folded.gen.name} began with (${snap.reason}, ${iso(snap.at)}), not a commit of its own, so history cannot show the moment just before it`;
  if (folded.priorAt === undefined) {
    return new AgentDbError('HISTORY_OUT_OF_RANGE', `${why}: this database's history begins with that snapshot; the earliest moment it can show is ${after}`);
  }
  return new AgentDbError(
    'HISTORY_LOST',
    `${why}; the nearest moments it can show are ${iso(folded.priorAt)} (the last one before that snapshot) and ${after}`,
  );
}

/** The key a call's record is under, and when it ran (its transaction's time), or undefined. */
export function recordedAt(db: Database, keys: readonly string[]): { key: string; at: number } | undefined {
  if (keys.length === 0) return undefined;
  if (trusted(db, `SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '${CALLS_TABLE}'`).get() === undefined) return undefined;
  for (const key of keys) {
    const row = trusted(db, `SELECT at FROM ${CALLS_TABLE} WHERE call_id = ?`).get(key) as { at: number } | undefined;
    if (row) return { key, at: row.at };
  }
  return undefined;
}

/** A call whose write is inside generation `gen`'s start state; `priorAt`: the last moment history holds before it, if any. */
interface Folded {
  gen: GenerationInfo;
  priorAt?: number;
}

/**
 * The history position just before the commit that wrote record `key`, taken at `ranAt`.
 * Capture takes a commit's time after it committed, under the write lock the next write waits
 * for: commits before the call's are captured at or before `ranAt`, the call's and later ones
 * at or after it. So the call's commit is the first captured after `ranAt`, unless some share
 * its millisecond: among those, the first whose frames hold the key's bytes (the page its record
 * went into) is the call's. A generation's start (its snapshot) is the answer only when it does
 * not hold the record already: a write folded into a snapshot has no moment before it in
 * history (`folded`). Undefined: no commit captured holds the call's write yet.
 */
function positionBefore(source: HistorySource, key: string, ranAt: number): { position: HistoryPosition } | { folded: Folded } | undefined {
  const needle = Buffer.from(key, 'utf8');
  let before: HistoryPosition | undefined;
  // Set while `before` is a generation's start state, which may hold commits no segment has.
  let start: Folded | undefined;
  let lastAt: number | undefined;
  const answer = (): { position: HistoryPosition } | { folded: Folded } => (start && startHolds(start.gen, needle) ? { folded: start } : { position: before! });
  for (const gen of listGenerations(source)) {
    if (!gen.snapshot) continue;
    // A generation's snapshot holds every commit before it: its own start is a state too.
    before = { generation: gen.name, segment: '', frames: 0 };
    start = { gen, ...(lastAt === undefined ? {} : { priorAt: lastAt }) };
    lastAt = gen.snapshot.at;
    for (const seg of listSegments(gen)) {
      let prev = 0;
      for (const c of readCommits(seg.indexPath, seg.closed)) {
        const base = gen.snapshot.base?.segment === seg.name && gen.snapshot.base.frames === c.frames;
        if (!base && (c.at > ranAt || (c.at === ranAt && framesHold(seg, gen.snapshot.pageSize, prev, c.frames, needle)))) return answer();
        before = { generation: gen.name, segment: seg.name, frames: c.frames };
        if (!base) {
          start = undefined;
          lastAt = c.at;
        }
        prev = c.frames;
      }
    }
  }
  return start && startHolds(start.gen, needle) ? { folded: start } : undefined;
}

/**
 * Whether a generation's start state holds `needle` (a call's record key): its snapshot file,
 * and the commit a linked snapshot begins with (`SnapshotMeta.base`). Read only when a call's
 * write was not found among the commits before it: once a generation, at most. The bytes of a
 * record deleted before the snapshot could linger in a free page and say yes for a key used
 * again later; that errs toward refusing, never toward answering the state after the write.
 */
function startHolds(gen: GenerationInfo, needle: Buffer): boolean {
  if (fileHolds(gen.snapshotPath, needle)) return true;
  const base = gen.snapshot?.base;
  if (!base) return false;
  const seg = listSegments(gen).find((s) => s.name === base.segment);
  return seg !== undefined && framesHold(seg, gen.snapshot!.pageSize, 0, base.frames, needle);
}

const SCAN_CHUNK = 1024 * 1024;

/** Whether `file` holds `needle`, read in chunks that overlap by the needle's length. */
function fileHolds(file: string, needle: Buffer): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(SCAN_CHUNK + needle.length);
    let pos = 0;
    let kept = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, kept, SCAN_CHUNK, pos);
      if (n === 0) return false;
      const len = kept + n;
      if (buf.subarray(0, len).includes(needle)) return true;
      pos += n;
      kept = Math.min(needle.length - 1, len);
      buf.copy(buf, 0, len - kept, len);
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** Whether frames `after`+1 … `upTo` of a segment hold `needle` in their pages. */
function framesHold(seg: SegmentInfo, pageSize: number, after: number, upTo: number, needle: Buffer): boolean {
  for (const batch of frameBatches(seg.generation, seg.name, seg.dataPath, upTo, pageSize)) {
    for (let i = 0; i < batch.count; i++) {
      if (batch.first + i <= after) continue;
      const start = i * batch.frameBytes + FRAME_HEADER_BYTES;
      if (batch.buf.subarray(start, start + pageSize).includes(needle)) return true;
    }
  }
  return false;
}

/**
 * The key of the exact state a plan restores: two moments within the same commit plan alike
 * and share it.
 */
export function momentKey(plan: RestorePlan): string {
  const last = plan.segments.at(-1);
  return `${plan.generation}.${last ? `${last.name}.${last.frames}` : 'snapshot'}`;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
