import fs from 'node:fs';
import type { SegmentInfo } from './history-files.ts';

/** What was read of one segment's index: its file as it was (to tell it unchanged), the bytes of the lines read and their CRC-32, the commits taken. */
export interface SegmentRead {
  name: string;
  size: number;
  mtimeMs: number;
  goodBytes: number;
  crc: number;
  commits: number;
}

/** An index file's size and mtime (-1 when gone): what tells it unchanged since it was read. */
export function stampOf(indexPath: string): { size: number; mtimeMs: number } {
  const st = fs.statSync(indexPath, { throwIfNoEntry: false });
  return { size: st?.size ?? -1, mtimeMs: st?.mtimeMs ?? -1 };
}

export function sameStamp(seen: SegmentRead, indexPath: string): boolean {
  const now = stampOf(indexPath);
  return now.size === seen.size && now.mtimeMs === seen.mtimeMs;
}

/** Whether the segments read are as they were (same names, same index files) and, with `all`, the only ones. */
export function unchanged(read: SegmentRead[], segments: SegmentInfo[], all = false): boolean {
  if (all && segments.length !== read.length) return false;
  return read.every((seen, s) => segments[s]?.name === seen.name && sameStamp(seen, segments[s]!.indexPath));
}

/** What was read of one generation: enough to tell it unchanged, and to go on reading it. */
export interface GenerationRead {
  name: string;
  sha?: string;
  endedAt?: number;
  /** Its segments read so far. */
  segments: SegmentRead[];
  /** The state its last commit read left (its first state before any). */
  state?: string;
}
