import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { fullDiskFault } from './dry-run-disk.ts';
import { READERS_DIR, readJson } from './history-files.ts';

/** A reader marker older than this is taken for a crashed restore's, even if its pid lives (reused). */
const STALE_MS = 6 * 3600 * 1000;

interface Marker {
  pid: number;
  at: number;
  what: string;
}

/**
 * Marks a database's history as read by a restore, for as long as `fn` runs: prune leaves a
 * history with a live marker alone, and a second restore of the same database is refused with
 * RESTORE_RUNNING rather than racing the first. A marker whose process is gone counts for nothing.
 *
 * `unmarkedOnFullDisk` (a dry run, which reads the index alone): when the disk has no room for
 * the marker, `fn` runs without one, told so (`marked` false), after the same check for others.
 * @throws AgentDbError RESTORE_RUNNING when another live restore holds a marker.
 */
export function withReader<T>(historyDir: string, what: string, opts: { unmarkedOnFullDisk?: boolean }, fn: (marked: boolean) => T): T {
  const dir = path.join(historyDir, READERS_DIR);
  const mine = path.join(dir, `${randomUUID()}.json`);
  let marked = true;
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(mine, JSON.stringify({ pid: process.pid, at: Date.now(), what } satisfies Marker));
  } catch (err) {
    fs.rmSync(mine, { force: true });
    if (!opts.unmarkedOnFullDisk || !fullDiskFault(err, historyDir)) throw err;
    marked = false;
  }
  try {
    const other = activeReaders(historyDir).find((m) => m.file !== mine);
    if (other)
      throw new AgentDbError('RESTORE_RUNNING', `a restore of this database (${other.what}) started at ${new Date(other.at).toISOString()} is still running`);
    return fn(marked);
  } finally {
    if (marked) fs.rmSync(mine, { force: true });
  }
}

/** The live reader markers of a history (stale ones are removed on the way). */
export function activeReaders(historyDir: string): (Marker & { file: string })[] {
  const dir = path.join(historyDir, READERS_DIR);
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const live: (Marker & { file: string })[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    const m = readJson<Marker>(file);
    if (m && alive(m.pid) && Date.now() - m.at < STALE_MS) live.push({ ...m, file });
    else if (m) fs.rmSync(file, { force: true });
  }
  return live;
}

/** Whether process `pid` runs (one of another user's counts: it exists). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
