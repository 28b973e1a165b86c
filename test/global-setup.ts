import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, statfsSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);
/** What `npm run build` compiles from, and what says how. */
const SOURCES = ['src', 'bin', 'workers', 'scripts', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
/** Written last by the build: present and newer than every source, the build is current. */
const STAMP = path.join(ROOT, 'dist/src/contracts/tool-contracts.json');
/** statfs(2)'s f_type of a tmpfs. */
const TMPFS_MAGIC = 0x01021994;
/**
 * Room a tmpfs must have free for the suite's temp folders (a few hundred MB at most at once),
 * and well past what `agentdb doctor` warns of (2 GiB, 10%), which its test expects to pass.
 */
const TMPFS_ROOM = 4 * 1024 ** 3;

/**
 * A temp folder on /dev/shm when it is a tmpfs with room, for TMPDIR: every data folder, own
 * Redis (AOF with fsync always) and history the tests make goes under os.tmpdir(), and on the
 * shared disk each snapshot, generation and AOF write waits for its fsync (4-7 ms each on this
 * machine's virtual disk with other work on it, under 0.1-1.4 ms on tmpfs; the executor test
 * that creates 400 databases took 38-49 s on the disk, 23-26 s here, loaded). What the tests
 * prove does not rest on the disk: a killed process loses nothing the kernel was given either
 * way, and the full-disk tests mount a tmpfs of their own. Undefined where there is none or it
 * is small (a container's 64 MB /dev/shm), or when TMPDIR was set: the tests use os.tmpdir().
 */
function tmpfsTempDir(): string | undefined {
  if (process.env.TMPDIR) return undefined;
  try {
    const st = statfsSync('/dev/shm');
    if (st.type !== TMPFS_MAGIC || st.bavail * st.bsize < TMPFS_ROOM || st.bavail < st.blocks / 2) return undefined;
    return mkdtempSync('/dev/shm/agentdb-tests-');
  } catch {
    return undefined;
  }
}

/** The newest modification time of a file, or of a folder and anything under it. */
function newest(p: string): number {
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  return readdirSync(p).reduce((max, name) => Math.max(max, newest(path.join(p, name))), st.mtimeMs);
}

/**
 * Builds dist/ before the suite when any source is newer than it. End-to-end tests run the
 * `agentdb` command as users do, from the build (test/helpers/processes.ts): under tsx each
 * start of the CLI, of a worker and of every executor child it forks cost about five times the
 * CPU, which on two cores made the CLI suites most of their run time. Building here, rather
 * than trusting whatever dist/ holds, is what keeps a test from ever running a stale build.
 */
export default function setup(): (() => void) | undefined {
  // Node's compile cache for every process the suite starts: set here, before the test forks
  // start, it reaches them and all they spawn (the CLI, workers, executor children), which then
  // load the V8 code of bullmq, ioredis, fastify, zod and dist/ compiled once instead of
  // compiling it at each of their hundreds of starts. Keyed by each file's contents, so a
  // rebuilt dist/ is never served old code.
  process.env.NODE_COMPILE_CACHE ??= path.join(os.tmpdir(), 'agentdb-test-compile-cache');
  // Set before the forks start too, so it reaches them and every process they spawn.
  const tmp = tmpfsTempDir();
  if (tmp) process.env.TMPDIR = tmp;
  // Each test removes its own folders; this takes what a killed process left behind, and the
  // tmpfs mounts of full-disk tests whose file was collected but never run (`vitest list`, a `-t`
  // filter: they mount at the top of the file to decide whether to run).
  const teardown = tmp
    ? () => {
        unmountUnder(tmp);
        rmSync(tmp, { recursive: true, force: true, maxRetries: 3 });
      }
    : undefined;
  const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0;
  if (SOURCES.every((s) => !existsSync(path.join(ROOT, s)) || newest(path.join(ROOT, s)) <= built)) return teardown;
  // `npm run build`'s two steps, apart: tsc emits in spite of type errors, which are `npm run
  // typecheck`'s to report, not a reason to run no test (nor to leave the contracts unwritten).
  try {
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'ignore' });
  } catch {
    process.stderr.write('global-setup: tsc -p tsconfig.build.json reported errors; the tests run on what it emitted\n');
  }
  // The Lua scripts first: the contracts file is the stamp, so it is written last.
  execFileSync(process.execPath, ['dist/scripts/copy-lua-scripts.js'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(process.execPath, ['dist/scripts/write-tool-contracts.js'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  return teardown;
}

/** Unmounts (lazily) every mount at or under `dir`, the deepest first; where that fails, leaves it. */
function unmountUnder(dir: string): void {
  let mounts: string[];
  try {
    // /proc/self/mountinfo's fifth field is the mount point, with spaces and the like escaped.
    mounts = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((line) => line.split(' ')[4] ?? '')
      .filter((at) => at === dir || at.startsWith(`${dir}/`));
  } catch {
    return;
  }
  for (const at of mounts.sort((a, b) => b.length - a.length)) {
    try {
      execFileSync('umount', ['-l', at], { stdio: 'ignore' });
    } catch {
      // Not ours to unmount, or gone already: rmSync says what is left.
    }
  }
}
