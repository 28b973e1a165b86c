import fs from 'node:fs';
import path from 'node:path';
import { ANSWERED_FILE, readAllAnswered, type Answered } from './answered-commits.ts';
import type { State } from './capture-state.ts';
import { SEGMENT_INDEX_EXT, SEGMENTS_DIR, SNAPSHOT_META, readJson, type HistorySource, type SnapshotMeta } from './history-files.ts';
import { readNames } from './newest-history.ts';
import { readIndex } from './segment-index.ts';

/**
 * How far a record's time may lie past the answered file's modification time: file times come
 * from a coarse clock, a few milliseconds behind `Date.now()`.
 */
const COARSE_CLOCK_MS = 1000;

/**
 * Whether a commit was answered after the last moment history `st` holds, or in the WAL its
 * segment copies past what the segment holds: with no WAL left to copy it from, that commit is
 * in the file only, folded in by a close that copied nothing (review R3: a child left behind by
 * its killed worker closed its handle while the disk was full). History cannot go on from the
 * file, and sealing it would let every restore after those answers leave them out silently: it
 * is the evidence a gap needs to be marked lost. A copied commit's index line carries the time
 * it was answered at (`noteAnswered`, `lateAnswers`), and a generation's snapshot is taken after
 * every commit the file holds, so a record newer than both was never copied.
 * `late`: this process's answers whose copy failed, beside the file's.
 */
export function answeredAhead(st: State, source: HistorySource, late: Map<string, Answered> | undefined): boolean {
  const seg = st.seg;
  const past = (a: Answered, endAt: number) =>
    a.at > endAt || (seg !== undefined && a.salt1 === seg.header.salt1 && a.salt2 === seg.header.salt2 && a.frame > seg.frames);
  const written = fs.statSync(path.join(path.dirname(source.generationsDir), ANSWERED_FILE), { throwIfNoEntry: false })?.mtimeMs;
  if (written === undefined && !late?.size) return false;
  const endAt = endOfHistory(st);
  if ([...(late?.values() ?? [])].some((a) => past(a, endAt))) return true;
  // Last written well before history's last moment (a generation begun since the last answer),
  // the file holds no record past it: not read (40 KB).
  if (written === undefined || written + COARSE_CLOCK_MS < endAt) return false;
  return readAllAnswered(source).some((a) => past(a, endAt));
}

/** The last moment history `st` holds: its generation's snapshot, or its newest commit. */
function endOfHistory(st: State): number {
  let end = readJson<SnapshotMeta>(path.join(st.genDir, SNAPSHOT_META))?.at ?? 0;
  const dir = path.join(st.genDir, SEGMENTS_DIR);
  // The newest segment with a commit (one begun for a WAL that started over may hold none yet),
  // by its latest line: a line may take an earlier answer's time than the copy's (`copyCommitted`).
  for (const name of readNames(dir)
    .filter((n) => n.endsWith(SEGMENT_INDEX_EXT))
    .reverse()) {
    const commits = readIndex(path.join(dir, name)).commits;
    if (commits.length === 0) continue;
    for (const c of commits) end = Math.max(end, c.at);
    break;
  }
  return end;
}
