import fs from 'node:fs';
import path from 'node:path';

/**
 * A generation's seal: proof that the database file alone held exactly the history's state at
 * a position, and has not been written since.
 *
 * Capture needs it when the live WAL starts with salts it has never seen. That happens each
 * time the last connection closed (the close checkpoints and deletes the WAL) and a new one
 * writes, which is routine, but also after another program wrote and checkpointed behind
 * capture's back, which is a gap. The file's size cannot tell them apart: a write that reuses
 * free pages leaves it unchanged (that is how the randomized test once restored a damaged
 * file). A seal is written only where nothing can have slipped past capture — by the connection
 * that closed last, having copied every frame under the write lock, or by a snapshot — and it
 * holds while the file's identity, size, modification time and change time are unchanged. The
 * change time catches a write whose modification time was put back; it also moves with `chown`,
 * `chmod` or a link made or removed, which change no page, but nothing short of reading the whole
 * file can tell those apart, and going on from a file written behind history's back restores
 * every later moment wrong: a gap (a snapshot of the file) is the price of either.
 */
export interface Seal {
  /** The history's last commit when sealed: segment name ('' before any) and frames in it. */
  segment: string;
  frames: number;
  size: string;
  mtimeNs: string;
  ino: string;
  /**
   * The file's status change time: a program can put a file's modification time back
   * (`utimes`), never its change time, which any write moves (and putting the times back does
   * too). Absent in seals written before it was kept.
   */
  ctimeNs?: string;
}

const SEAL_FILE = 'sealed.json';

/**
 * File timestamps come from a coarse clock (a few milliseconds): a write landing in the same
 * tick as the seal would keep the sealed mtime. A file written that recently has its mtime set
 * back this far, so that any later write, by anyone, moves it forward.
 */
const REWIND_MS = 1000;

/**
 * Seals generation `genDir` at position (`segment`, `frames`) for the database file `dbPath`.
 * Written without fsync: a seal lost to a power cut only costs the next capture a fresh
 * snapshot (it then sees a gap), never a wrong history.
 */
export function writeSeal(genDir: string, dbPath: string, segment: string, frames: number): void {
  let st = fs.statSync(dbPath, { bigint: true });
  const now = Date.now();
  if (now - Number(st.mtimeMs) < REWIND_MS) {
    fs.utimesSync(dbPath, st.atime, new Date(now - REWIND_MS));
    st = fs.statSync(dbPath, { bigint: true });
  }
  const seal: Seal = { segment, frames, size: String(st.size), mtimeNs: String(st.mtimeNs), ino: String(st.ino), ctimeNs: String(st.ctimeNs) };
  const file = path.join(genDir, SEAL_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(seal));
  fs.renameSync(tmp, file);
}

/** Whether `dbPath` is, untouched, what generation `genDir` sealed at (`segment`, `frames`). */
export function sealHolds(genDir: string, dbPath: string, segment: string, frames: number): boolean {
  return sealAt(genDir, dbPath, segment, frames) === 'holds';
}

/**
 * How `dbPath` stands to generation `genDir`'s seal at (`segment`, `frames`): `holds` (untouched
 * since), `broken` (written since: history is there, the WAL gone, and the file is no longer what
 * it was, another program wrote it and its last close checkpointed and removed the WAL) or `none`
 * (no seal at that position).
 */
export function sealAt(genDir: string, dbPath: string, segment: string, frames: number): 'holds' | 'broken' | 'none' {
  let seal: Seal;
  try {
    seal = JSON.parse(fs.readFileSync(path.join(genDir, SEAL_FILE), 'utf8')) as Seal;
  } catch {
    return 'none';
  }
  if (seal.segment !== segment || seal.frames !== frames) return 'none';
  const st = fs.statSync(dbPath, { bigint: true, throwIfNoEntry: false });
  const same = st !== undefined && seal.size === String(st.size) && seal.mtimeNs === String(st.mtimeNs) && seal.ino === String(st.ino);
  return same && (seal.ctimeNs === undefined || seal.ctimeNs === String(st.ctimeNs)) ? 'holds' : 'broken';
}

const RESTORING_FILE = 'restoring.json';

/**
 * Marks generation `genDir` as one a restore in place is leaving: the restore's own commit (the
 * whole database, copied in) goes into no segment of it but into the next generation's
 * snapshot. Until that generation exists, nothing may take the live file or a restarted WAL as
 * continuing this one, or a restore that failed half-way would leave a history that silently
 * skips it: {@link restoreLeaving} makes capture see a gap (a fresh snapshot) and seal nothing.
 * Written before the restore touches the live database, removed once the next generation is in.
 */
export function markRestoreLeaving(genDir: string): void {
  fs.writeFileSync(path.join(genDir, RESTORING_FILE), JSON.stringify({ pid: process.pid, at: Date.now() }));
}

/** Removes the mark of {@link markRestoreLeaving}. */
export function unmarkRestoreLeaving(genDir: string): void {
  fs.rmSync(path.join(genDir, RESTORING_FILE), { force: true });
}

/** Whether a restore in place marked generation `genDir` (see {@link markRestoreLeaving}). */
export function restoreLeaving(genDir: string): boolean {
  return fs.existsSync(path.join(genDir, RESTORING_FILE));
}
