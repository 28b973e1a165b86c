import { execFileSync } from 'node:child_process';

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
