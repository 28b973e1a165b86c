import fs from 'node:fs';
import path from 'node:path';
import { GENERATION_END, SEGMENTS_DIR, SEGMENT_DATA_EXT, segmentName } from './history-files.ts';

/**
 * What must not have changed for a cached state to hold: no later generation (it would have
 * marked this one ended), no next segment, the index's size (it only grows), and the folder of
 * generations (a prune, for the byte count). Another child may have captured this database
 * since: existence and sizes say so exactly, where folder mtimes tick too coarsely (a segment
 * begun in the same tick once went unseen, and was begun again over the other's).
 */
export function stampOf(genDir: string, seq: number, indexPath: string | undefined): string {
  const gens = fs.statSync(path.dirname(genDir), { throwIfNoEntry: false });
  const ended = fs.existsSync(path.join(genDir, GENERATION_END));
  const next = fs.existsSync(path.join(genDir, SEGMENTS_DIR, segmentName(seq + 1) + SEGMENT_DATA_EXT));
  const idx = indexPath ? fs.statSync(indexPath, { throwIfNoEntry: false }) : undefined;
  return `${gens?.mtimeMs}|${ended}|${next}|${idx?.size}`;
}

const probe = Buffer.alloc(2);

/**
 * Whether the index open at `fd` is exactly `bytes` long: one read at its end (nothing past it,
 * its last byte there), where an fstat also built a Stats object of four dates on every commit.
 */
export function indexIs(fd: number, bytes: number): boolean {
  return bytes === 0 ? fs.readSync(fd, probe, 0, 1, 0) === 0 : fs.readSync(fd, probe, 0, 2, bytes - 1) === 1;
}

/** The index's size a stamp holds (its last field). */
export function stampedIndexBytes(stamp: string): number {
  return Number(stamp.slice(stamp.lastIndexOf('|') + 1));
}

export function bumpStamp(stamp: string, grew: number): string {
  if (grew === 0) return stamp;
  const cut = stamp.lastIndexOf('|');
  return `${stamp.slice(0, cut)}|${Number(stamp.slice(cut + 1)) + grew}`;
}
