import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { result, type CheckResult } from './check.ts';

/** Free space on the data folder's disk below which writes and history copies start failing soon. */
const DISK_WARN = { bytes: 2 * 1024 ** 3, share: 0.1 };
const DISK_FAIL = { bytes: 256 * 1024 ** 2, share: 0.02 };
/**
 * The least Node major agentdb runs on: better-sqlite3 13, which every database runs in, asks for
 * it, and on Node 20 loading it crashes the process (SIGSEGV; session 38, N16: `agentdb start`'s
 * executor children died one after another and the server exited, saying only that).
 */
const NODE_LEAST = 22;

function gib(n: number): string {
  return n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : `${Math.round(n / 1024 ** 2)} MiB`;
}

/** The Node version running this process against the least agentdb runs on. */
export function nodeCheck(version = process.versions.node): CheckResult {
  const major = Number(version.split('.')[0]);
  if (major >= NODE_LEAST) return result('node-version', 'ok', `Node ${version}.`);
  return result(
    'node-version',
    'fail',
    `Node ${version}: agentdb needs Node ${NODE_LEAST} or later (better-sqlite3, which runs its databases, crashes on Node ${major}).`,
    `Run agentdb on Node ${NODE_LEAST} or 24 (\`node -v\` in the terminal you run it in; the Docker image: FROM node:24-…), and run npm ci again on it.`,
  );
}

/** The nearest folder at or above `p` that exists (the data folder may not exist yet). */
function existingAncestor(p: string): string {
  let dir = path.resolve(p);
  while (!fs.existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

/** Free space on the disk of the data folder (or of the folder it will be made in). */
export function diskCheck(dataDir: string): CheckResult {
  const where = existingAncestor(dataDir);
  let stats: fs.StatsFs;
  try {
    stats = fs.statfsSync(where);
  } catch (err) {
    return result(
      'disk-free',
      'fail',
      `Could not read the free space of ${where}: ${(err as Error).message}.`,
      'Check that AGENTDB_DATA_DIR is on a mounted, readable file system.',
    );
  }
  const free = stats.bavail * stats.bsize;
  const total = stats.blocks * stats.bsize;
  const share = total > 0 ? free / total : 1;
  const detail = `${gib(free)} free of ${gib(total)} (${Math.round(share * 100)}%) on the disk of ${dataDir}.`;
  const fix =
    'Free space on that disk, or move AGENTDB_DATA_DIR to a larger one; `agentdb scheduler --prune-now` deletes history and results past their retention.';
  if (free < DISK_FAIL.bytes || share < DISK_FAIL.share) return result('disk-free', 'fail', `${detail} Writes answer STORAGE_FULL once it is gone.`, fix);
  if (free < DISK_WARN.bytes || share < DISK_WARN.share)
    return result('disk-free', 'warn', `${detail} Databases, their history and offloaded results all grow here.`, fix);
  return result('disk-free', 'ok', detail);
}

/**
 * The data folder: a folder this user owns and can write (a file is created, synced and
 * deleted in it), with the folders agentdb made inside it owned alike. A volume made by an
 * image that ran as root is the usual cause of a failure here.
 */
export function dataFolderCheck(dataDir: string): CheckResult {
  const check = 'data-folder';
  const dir = path.resolve(dataDir);
  const uid = process.getuid?.();
  const user = uid === undefined ? 'this user' : `uid ${uid}`;
  const chown = `chown -R ${uid ?? '<user>'} ${dir} (in Docker: docker compose run --rm -u root agentdb chown -R node:node /data)`;
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      return result(check, 'fail', `Could not read ${dir}: ${(err as Error).message}.`, `Make ${dir} a folder ${user} can read and write.`);
    const parent = existingAncestor(dir);
    try {
      fs.accessSync(parent, fs.constants.W_OK);
      return result(
        check,
        'warn',
        `${dir} does not exist yet; agentdb makes it at start (in ${parent}, which ${user} may write).`,
        `Check that AGENTDB_DATA_DIR (${dir}) is where the data should live, or make it now: mkdir -p ${dir}.`,
      );
    } catch {
      return result(
        check,
        'fail',
        `${dir} does not exist, and ${user} may not make it in ${parent}.`,
        `mkdir -p ${dir} && chown ${uid ?? '<user>'} ${dir}, or set AGENTDB_DATA_DIR to a folder ${user} may write.`,
      );
    }
  }
  if (!st.isDirectory()) return result(check, 'fail', `${dir} is not a folder.`, 'Set AGENTDB_DATA_DIR to a folder.');
  const probe = path.join(dir, `.doctor-${randomUUID()}`);
  try {
    const fd = fs.openSync(probe, 'wx');
    try {
      fs.writeSync(fd, 'agentdb doctor');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.unlinkSync(probe);
  } catch (err) {
    fs.rmSync(probe, { force: true });
    return result(check, 'fail', `${user} cannot write in ${dir}: ${(err as Error).message}.`, chown);
  }
  if (uid !== undefined) {
    // The folder and what agentdb made at its top (shards/, blobs/, each shard's folder): a
    // database file of another owner fails to open at its first call, not at start.
    const others = [dir, ...listed(dir), ...listed(path.join(dir, 'shards'))].filter((p) => {
      try {
        return fs.statSync(p).uid !== uid;
      } catch {
        return false;
      }
    });
    if (others.length > 0) {
      const shown = others
        .slice(0, 3)
        .map((p) => path.relative(dir, p) || '.')
        .join(', ');
      return result(
        check,
        'warn',
        `${user} can write in ${dir}, but ${others.length} of its entries belong to another user (${shown}${others.length > 3 ? ', …' : ''}): a process of that user, or root, wrote them.`,
        chown,
      );
    }
  }
  return result(check, 'ok', `${dir} is a folder ${user} owns and can write.`);
}

/** Up to 1,000 entries of a folder (none if it does not exist). */
function listed(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir)
      .slice(0, 1000)
      .map((name) => path.join(dir, name));
  } catch {
    return [];
  }
}
