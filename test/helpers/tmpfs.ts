import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Mounts a tmpfs of `size` (mount(8)'s form: `8m`) on `dir`, for the tests of a full disk.
 * @returns undefined once mounted; else why the machine refused (it needs root and mount(2)),
 * for the test to say so and skip.
 */
export function mountTmpfs(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return String((err as { stderr?: Buffer }).stderr ?? err).trim() || String(err);
  }
}

/** A folder with a tmpfs mounted on it, or why the machine refused (the folder is gone then). */
export interface TmpfsFolder {
  mnt: string;
  refused: string | undefined;
}

/**
 * A new folder in the temporary folder (`prefix`…) with a tmpfs of `size` (`8m`) on it, for the
 * test file `file` of a full disk. Where the machine refuses to mount it, the folder is removed,
 * `refused` says why, and the file is said skipped (its tests run under `describe.runIf(!refused)`).
 */
export function tmpfsFolder(prefix: string, size: string, file: string): TmpfsFolder {
  const mnt = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const refused = mountTmpfs(mnt, size);
  if (refused) {
    fs.rmSync(mnt, { recursive: true, force: true });
    console.warn(`${file}: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
  }
  return { mnt, refused };
}

/** Unmounts and removes a folder {@link tmpfsFolder} mounted (nothing where it was refused). */
export function removeTmpfsFolder(mnt: string, refused: string | undefined): void {
  if (refused) return;
  unmountTmpfs(mnt);
  fs.rmSync(mnt, { recursive: true, force: true });
}

/** Gives room back: the tmpfs on `dir` grows to `size`. */
export function growTmpfs(dir: string, size: string): void {
  execFileSync('mount', ['-o', `remount,size=${size}`, dir], { stdio: 'pipe' });
}

/** Unmounts the tmpfs on `dir`, lazily when something still holds a file in it. */
export function unmountTmpfs(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'pipe' });
  } catch {
    execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
  }
}

/**
 * Fills the file system of `file` to its last byte, in ever smaller writes to `file`.
 * @returns its descriptor and size, to give some room back later (ftruncate) and to close.
 */
export function fillDisk(file: string): { fd: number; size: number } {
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(256 * 1024, 1);
  let size = 0;
  for (const step of [chunk.length, 4096, 512]) {
    for (;;) {
      try {
        const n = fs.writeSync(fd, chunk, 0, step, size);
        size += n;
        if (n < step) break;
      } catch {
        break;
      }
    }
  }
  return { fd, size };
}

/** Fills the file system of `filler` to its last byte with it (dd, as a runaway writer would), kept until removed. */
export function fillToLastByte(filler: string): void {
  try {
    execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'pipe' });
  } catch {
    // dd stops with ENOSPC: that is the point.
  }
}

/**
 * Runs `run`, which may call the `fill` it is given (in a restore's step, say) to fill the file
 * system of `filler` but for `room` bytes at that moment; the room is given back after, however
 * `run` ends. Answers what `run` answered and the fill, undefined if `run` never called it.
 */
export function fillWhenCalled<T>(filler: string, room: number, run: (fill: () => void) => T): { answer: T; fill: { fd: number; size: number } | undefined } {
  let fill: { fd: number; size: number } | undefined;
  try {
    const answer = run(() => {
      fill = fillDisk(filler);
      if (room > 0) fs.ftruncateSync(fill.fd, fill.size - room);
    });
    return { answer, fill };
  } finally {
    if (fill) fs.closeSync(fill.fd);
    fs.rmSync(filler, { force: true });
  }
}

/**
 * Runs `run` with the file system of `filler` full but for `room` bytes (filled by
 * {@link fillDisk}, then given back by truncating `filler`), and gives all the room back after,
 * however `run` ends: the sweeps over free room around a growth point run one of these a step.
 */
export async function withRoom<T>(filler: string, room: number, run: () => Promise<T>): Promise<T> {
  const fill = fillDisk(filler);
  fs.ftruncateSync(fill.fd, Math.max(0, fill.size - room));
  try {
    return await run();
  } finally {
    fs.closeSync(fill.fd);
    fs.rmSync(filler);
  }
}

/**
 * The least room, a whole number of `step`s, at which `attempt` answers true, found by bisection
 * between `lo` (tried, and answered false) and `hi` (doubled until it answers true): a sweep over
 * every step from no room held a CI slot for minutes (F14's took 125-371 s), bisection takes
 * ~log2(hi / step) attempts. The answers must be false below some room and true from it.
 */
export async function leastRoom(attempt: (room: number) => Promise<boolean>, lo: number, hi: number, step: number): Promise<number> {
  while (!(await attempt(hi))) [lo, hi] = [hi, hi * 2];
  while (hi - lo > step) {
    const mid = lo + Math.floor((hi - lo) / 2 / step) * step;
    if (await attempt(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}
