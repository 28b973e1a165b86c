import fs from 'node:fs';
import path from 'node:path';
import { SEGMENTS_DIR, SEGMENT_DATA_EXT, nameSeq } from './history-files.ts';

/** The newest generation in `generationsDir`, as history's files show it (undefined: no history). */
export function newestGeneration(generationsDir: string): string | undefined {
  return readNames(generationsDir)
    .filter((n) => n.startsWith('g') && nameSeq(n) !== undefined)
    .at(-1);
}

/** The newest segment of the generation at `genDir` (its name, without extension), if it has one. */
export function newestSegment(genDir: string): string | undefined {
  return readNames(path.join(genDir, SEGMENTS_DIR))
    .filter((n) => n.endsWith(SEGMENT_DATA_EXT))
    .map((n) => n.slice(0, -SEGMENT_DATA_EXT.length))
    .at(-1);
}

/** A folder's names, sorted (none when it cannot be read). */
export function readNames(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
}
