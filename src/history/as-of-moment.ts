import type { Database } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { CALLS_TABLE } from '../sqlite/call-record.ts';
import { trusted } from '../sqlite/sqlite-trusted.ts';
import { frameBatches } from './frame-scan.ts';
import { listGenerations, listSegments, type HistoryPosition, type HistorySource, type SegmentInfo } from './history-files.ts';
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
 * in the future, a call older than it), HISTORY_LOST, AS_OF_CALL_UNKNOWN (a call that wrote
 * nothing to this database that its record still holds).
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
      `call ${JSON.stringify(target.callId)} made no write to this database that it still records (a call's record is kept 7 days; a time works for older moments)`,
    );
  }
  if (ran.at < earliest)
    throw new AgentDbError(
      'HISTORY_OUT_OF_RANGE',
      `call ${JSON.stringify(target.callId)} ran at ${iso(ran.at)}, before the earliest moment kept, ${iso(earliest)}`,
    );
  const before = positionBefore(source, ran.key, ran.at);
  if (!before) throw new AgentDbError('AS_OF_CALL_UNKNOWN', `the commit of call ${JSON.stringify(target.callId)} is not in this database's history`);
  return planRestore(source, { position: before });
}

/** The key a call's record is under, and when it ran (its transaction's time), or undefined. */
function recordedAt(db: Database, keys: readonly string[]): { key: string; at: number } | undefined {
  if (keys.length === 0) return undefined;
  if (trusted(db, `SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '${CALLS_TABLE}'`).get() === undefined) return undefined;
  for (const key of keys) {
    const row = trusted(db, `SELECT at FROM ${CALLS_TABLE} WHERE call_id = ?`).get(key) as { at: number } | undefined;
    if (row) return { key, at: row.at };
  }
  return undefined;
}

/**
 * The history position just before the commit that wrote record `key`, taken at `ranAt`.
 * Capture takes a commit's time after it committed, under the write lock the next write waits
 * for: commits before the call's are captured at or before `ranAt`, the call's and later ones
 * at or after it. So the call's commit is the first captured after `ranAt`, unless some share
 * its millisecond: among those, the first whose frames hold the key's bytes (the page its record
 * went into) is the call's.
 */
function positionBefore(source: HistorySource, key: string, ranAt: number): HistoryPosition | undefined {
  const needle = Buffer.from(key, 'utf8');
  let before: HistoryPosition | undefined;
  for (const gen of listGenerations(source)) {
    if (!gen.snapshot) continue;
    // A generation's snapshot holds every commit before it: its own start is a state too.
    before = { generation: gen.name, segment: '', frames: 0 };
    for (const seg of listSegments(gen)) {
      let prev = 0;
      for (const c of readCommits(seg.indexPath, seg.closed)) {
        const base = gen.snapshot.base?.segment === seg.name && gen.snapshot.base.frames === c.frames;
        if (!base && (c.at > ranAt || (c.at === ranAt && framesHold(seg, gen.snapshot.pageSize, prev, c.frames, needle)))) return before;
        before = { generation: gen.name, segment: seg.name, frames: c.frames };
        prev = c.frames;
      }
    }
  }
  return undefined;
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
