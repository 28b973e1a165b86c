// A segment's commit index (`segments/<n>.idx`, see history-files.ts): one JSON line per commit, each
// with a CRC-32 of its fields, appended by capture and read by every restore's plan.
import fs from 'node:fs';
import zlib from 'node:zlib';
import { AgentDbError } from '../errors.ts';
import type { CommitRecord } from './history-files.ts';

/**
 * The commits a segment's index holds. A line cut short by a crash or a full disk (no newline
 * yet) is ignored (its frames were never acknowledged as copied); capture cuts such a tail off
 * before it appends again (see {@link readIndex}), so it never hides later commits.
 * `closed`: no capture appends to the segment any more (`SegmentInfo.closed`), so a torn tail
 * is no crash's: it is damage too.
 * @throws AgentDbError HISTORY_CORRUPT when a whole line is damaged (see {@link readIndex}):
 * every restore is planned from these lines, and one read wrong restores the wrong state.
 */
export function readCommits(indexPath: string, closed = false): CommitRecord[] {
  const index = readIndex(indexPath);
  const damaged = index.damaged ?? (closed && index.tail === 'torn' ? 'a torn last line in a segment no capture appends to' : undefined);
  if (damaged)
    throw new AgentDbError(
      'HISTORY_CORRUPT',
      `history index ${indexPath} is damaged (${damaged}); restore to a moment before its segment, or after the generation that followed`,
    );
  return index.commits;
}

/**
 * One index line: the commit's fields and a CRC-32 of them (`s`), so that a byte that rots in
 * the index is found, not read as another time or frame count. Built by hand (all numbers):
 * JSON.stringify showed in a capture's profile.
 */
export function commitLine(c: CommitRecord): string {
  return `{"at":${c.at},"frames":${c.frames},"dbPages":${c.dbPages},"c1":${c.c1},"c2":${c.c2},"s":${lineSum(c)}}\n`;
}

function lineSum(c: CommitRecord): number {
  return zlib.crc32(`${c.at},${c.frames},${c.dbPages},${c.c1},${c.c2}`);
}

const isCount = (n: unknown, min: number): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= min;
const isU32 = (n: unknown): n is number => isCount(n, 0) && n <= 0xffffffff;

/** A whole index line read back, or why it cannot be: fields of the right kinds, and its CRC when it has one (lines written before it was added have none). */
function parseCommitLine(line: string): CommitRecord | string {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return 'not JSON';
  }
  if (typeof v !== 'object' || v === null) return 'not a commit';
  const { at, frames, dbPages, c1, c2, s } = v;
  if (typeof at !== 'number' || !Number.isFinite(at) || at < 0 || !isCount(frames, 1) || !isCount(dbPages, 1) || !isU32(c1) || !isU32(c2))
    return 'a field is missing or out of range';
  const c: CommitRecord = { at, frames, dbPages, c1, c2 };
  if (s !== undefined && s !== lineSum(c)) return 'its CRC-32 does not match';
  return c;
}

/** What {@link readIndex} read of a segment's index. */
export interface SegmentIndex {
  commits: CommitRecord[];
  /** The bytes of the whole lines read (with a last line that lost only its newline, the file's size). */
  goodBytes: number;
  bytes: number;
  /** After the last newline: nothing, a crash's torn tail, or a whole line without its newline. */
  tail: 'none' | 'torn' | 'line';
  /** A line that does not read back: which, and why. */
  damaged?: string;
}

/**
 * A segment's index: its whole lines' commits, the bytes those lines take, and the file's size.
 * Only bytes after the last newline are a torn tail (capture writes whole lines in one call). A
 * whole line that does not read back as a commit is damage, not a tail: `damaged` says which,
 * and `commits` stops before it (capture never cuts such an index: see `loadState`).
 */
export function readIndex(indexPath: string): SegmentIndex {
  let text: Buffer;
  try {
    text = fs.readFileSync(indexPath);
  } catch {
    return { commits: [], goodBytes: 0, bytes: 0, tail: 'none' };
  }
  return parseIndex(text);
}

/** {@link readIndex} of an index's bytes already read. */
export function parseIndex(text: Buffer): SegmentIndex {
  const out: CommitRecord[] = [];
  let at = 0;
  let prev = 0;
  // Only lines ending in a newline: a line torn just before it parses, and the next line
  // appended would run into it.
  for (let nl = text.indexOf(10, at); nl >= 0; nl = text.indexOf(10, at)) {
    const line = text.toString('utf8', at, nl);
    if (!line) {
      at = nl + 1;
      continue;
    }
    const c = parseCommitLine(line);
    if (typeof c === 'string' || c.frames <= prev) {
      return {
        commits: out,
        goodBytes: at,
        bytes: text.length,
        tail: 'none',
        damaged: `line ${out.length + 1}: ${typeof c === 'string' ? c : 'its frame count does not follow the line before'}`,
      };
    }
    prev = c.frames;
    out.push(c);
    at = nl + 1;
  }
  if (at === text.length) return { commits: out, goodBytes: at, bytes: text.length, tail: 'none' };
  // After the last newline. A crash or a full disk leaves a prefix of the lines one write
  // appended, which holds no '}' (each line has one, at its end): a torn tail. A whole line
  // there lost only its newline (the last byte written, or rot): its commit counts, and capture
  // adds the newline before it appends. Anything else there is damage, not a crash's leftover.
  const tail = text.subarray(at);
  if (!tail.includes(0x7d)) return { commits: out, goodBytes: at, bytes: text.length, tail: 'torn' };
  const c = parseCommitLine(tail.toString('utf8'));
  if (typeof c === 'string' || c.frames <= prev) {
    return {
      commits: out,
      goodBytes: at,
      bytes: text.length,
      tail: 'torn',
      damaged: `line ${out.length + 1}, the last: ${typeof c === 'string' ? c : 'its frame count does not follow the line before'}`,
    };
  }
  out.push(c);
  return { commits: out, goodBytes: text.length, bytes: text.length, tail: 'line' };
}
