import fs from 'node:fs';
import path from 'node:path';
import { writeAll } from './write-all.ts';

// JSON files written whole or not at all, and read forgivingly: history's metadata (snapshot.json,
// ended.json, undo points, reader markers) and anything else kept that way.

/**
 * Writes `data` as JSON to `file` through a temporary name in the same folder, synced before
 * the rename, so readers never see half of it and a crash leaves the old file or the new one
 * (`sync: false`: a crash may leave the old one even after it returned).
 */
export function writeJsonAtomic(file: string, data: unknown, opts: { sync?: boolean } = {}): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  try {
    writeAll(fd, Buffer.from(JSON.stringify(data)));
    if (opts.sync !== false) fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

/** The parsed JSON in `file`, or undefined when it is missing or unreadable. */
export function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}
