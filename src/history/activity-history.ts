import fs from 'node:fs';
import zlib from 'node:zlib';
import { AgentDbError, codeOf } from '../errors.ts';
import { RowMatcher, type Group } from './activity-match.ts';
import { PIECE, readRowsOn, type ActivityRows, type RowOrder } from './activity-rows.ts';
import { type GenerationRead, sameStamp, stampOf, unchanged } from './activity-reads.ts';
import { compareKeys, idKey } from './commit-ids.ts';
import { listGenerations, listSegments, localSource, type GenerationInfo } from './history-files.ts';
import { parseIndex } from './segment-index.ts';
import { TurnClock } from './turn-clock.ts';

/**
 * The most commits and rows (together) the activity list reads of one database's history: about
 * 190 bytes of the worker's heap each while read, 95 MB at most. A workspace's disk quota allows
 * on the order of a million commits; past this a page is refused (RESOURCE_LIMIT) rather than
 * let one tenant's history grow the worker without bound (issue 29).
 */
export const ACTIVITY_READ_LIMIT = 500_000;

/** How long a history refused for its size is refused without being read again. */
const REFUSAL_KEPT_MS = 10 * 60_000;

/** A commit as the listing reads it from history's indexes, oldest first. */
export interface HistoryCommit {
  id: string;
  /** The state just before it: the commit before in history, or the generation's first state. */
  prev: string;
  at: number;
  /** The first commit of a restore's generation: the restore itself. */
  base: boolean;
}

/**
 * A database's history as the activity list matches it, read as far as it has been and read on
 * from there: the commits, their groups, the rows and the match. A page used to read every
 * segment index and every row of the retained history (review H29-4: 950 ms a page at 40,000
 * commits, on the shard worker's thread); kept, a page reads the generation listing, the index
 * of a segment that grew, and the rows added since. Commits and rows are read oldest first, as
 * the match is a forward pass (a row goes to the first group at or after it with room): matching
 * newest first would not give the same answer where groups fill up. Anything but appending
 * (a generation pruned or replaced, an index that shrank, rows pruned) reads all again.
 */
export class ActivityHistory {
  commits: HistoryCommit[] = [];
  groups: Group[] = [];
  order: RowOrder[] = [];
  matcher = new RowMatcher(this.groups);
  /**
   * Index files read, commits taken from them and rows read over the executor, counted (tests
   * check a page reads what changed, not everything; a page is charged for commits and rows).
   */
  readonly reads = { indexes: 0, commits: 0, rows: 0 };
  private gens: GenerationRead[] = [];
  private lastAt = 0;
  private prevEnd: number | undefined;
  private lastState: string | undefined;
  private clock = new TurnClock();
  private refused?: { error: AgentDbError; until: number };

  /** `bounds`: a turn's length and the read's limit (tests make them small). */
  constructor(
    private readonly dataDir: string,
    private readonly id: string,
    private readonly bounds: { turnMs?: number; readLimit?: number } = {},
  ) {}

  /** Reads on what was added to history and to the rows since the last call, and matches it. */
  async refresh(rows: ActivityRows): Promise<void> {
    // A history refused for its size is refused again at once for a while, without reading it
    // again: it only grows until a prune, and each read up to the limit costs the worker seconds
    // (review R29b M2).
    if (this.refused && Date.now() < this.refused.until) throw this.refused.error;
    this.refused = undefined;
    this.clock = new TurnClock(this.bounds.turnMs);
    try {
      await this.readOn(rows);
    } catch (err) {
      if (codeOf(err) === 'RESOURCE_LIMIT') this.refused = { error: err as AgentDbError, until: Date.now() + REFUSAL_KEPT_MS };
      // Read halfway (an index unreadable, the executor's answer an error): the match no longer
      // follows what was read. The next page reads everything again.
      this.reset();
      this.order = [];
      this.matcher = new RowMatcher(this.groups);
      throw err;
    }
  }

  private async readOn(rows: ActivityRows): Promise<void> {
    const groupsBefore = this.groups.length;
    const listing = listGenerations(localSource(this.dataDir, this.id));
    let fresh =
      !this.continues(listing) ||
      !this.gens.slice(0, this.resumeAt()).every((g, k) => g.state === undefined || unchanged(g.segments, listSegments(listing[k]!), true));
    if (fresh) this.reset();
    for (let k = this.resumeAt(); k < listing.length; k++) {
      if (!(await this.readGeneration(listing[k]!, k))) {
        this.reset();
        fresh = true;
        k = -1;
      }
    }
    const rowsFresh = await this.readRows(rows);
    let from = Math.max(0, Math.min(groupsBefore - 1, this.groups.length));
    if (fresh || rowsFresh) {
      for (const g of this.groups) g.rows.length = 0;
      this.matcher = new RowMatcher(this.groups);
      from = 0;
    }
    // In pieces: a first page matches every row, and the worker's other databases wait meanwhile.
    while (!this.matcher.update(this.order, from, this.commits.length, PIECE)) {
      await this.clock.tick();
      from = this.groups.length;
    }
  }

  /** Refuses a history past {@link ACTIVITY_READ_LIMIT} before more of it is held (`rowsHeld`: the rows being read, when read again). */
  private bounded(rowsHeld = this.order.length): void {
    const limit = this.bounds.readLimit ?? ACTIVITY_READ_LIMIT;
    if (this.commits.length + rowsHeld > limit)
      throw new AgentDbError(
        'RESOURCE_LIMIT',
        `the activity list reads at most ${limit} commits and activity rows of a database's history, and ${this.id}'s retained history holds more`,
      );
  }

  /**
   * The index of the commit `id` names (a page's `before`), or -1. Commits are in history's
   * order, which is their ids' (generation and segment names of one width, then the number):
   * searched by halves, not kept in a map (40,000 ids took 30 ms to map).
   */
  indexOf(id: string): number {
    const key = idKey(id);
    if (!key) return -1;
    let lo = 0;
    let hi = this.commits.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareKeys(idKey(this.commits[mid]!.id)!, key);
      if (c === 0) return mid;
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /**
   * The first generation that may have grown since: the last one read with a snapshot (capture
   * may append to it until the next one has its snapshot written), or 0.
   */
  private resumeAt(): number {
    for (let k = this.gens.length - 1; k >= 0; k--) if (this.gens[k]!.state !== undefined) return k;
    return 0;
  }

  /**
   * Whether `listing` is what was read before with only appending since: the generations before
   * the one to resume at as they were (a snapshot, an end), that one and those after grown.
   */
  private continues(listing: GenerationInfo[]): boolean {
    if (listing.length < this.gens.length) return false;
    const from = this.resumeAt();
    return this.gens.every((g, k) => {
      const now = listing[k]!;
      if (now.name !== g.name) return false;
      if (g.sha !== undefined ? now.snapshot?.sha256 !== g.sha : k < from && now.snapshot) return false;
      return k >= from ? g.endedAt === undefined || g.endedAt === now.end?.endedAt : g.endedAt === now.end?.endedAt;
    });
  }

  private reset(): void {
    this.commits = [];
    this.groups = [];
    this.gens = [];
    this.lastAt = 0;
    this.prevEnd = undefined;
    this.lastState = undefined;
  }

  /** Reads generation `g` (the `k`th) on from where it was left; false when it did not just grow. */
  private async readGeneration(g: GenerationInfo, k: number): Promise<boolean> {
    let read = this.gens[k];
    if (!read) {
      read = { name: g.name, segments: [] };
      this.gens.push(read);
    }
    const snap = g.snapshot;
    if (!snap) return true;
    const { commits, groups } = this;
    if (read.state === undefined) {
      read.sha = snap.sha256;
      // Before a restore's base commit is the generation it left (the state the restore replaced);
      // before any other generation's first commit, its snapshot (a gap's may differ from the last commit before).
      read.state = snap.base ? (this.lastState ?? g.name) : g.name;
      // A snapshot holds the commits before it history did not keep apart (the first writes, a
      // gap's, a fork's source's): their rows go to it. Not a restore in place's: what it holds
      // was matched with the generations before, and its restore's row is its base commit's.
      // A restore from the blob store begins its history, and so does a restore in place whose
      // generations before were pruned: the rows before its own are the snapshot's, its own the
      // base commit's (`SnapshotMeta.base.began`).
      if (!snap.base || groups.length === 0)
        groups.push({
          at: snap.base?.began !== undefined ? snap.base.began - 1 : snap.at,
          commits: [],
          rows: [],
          snapshot: true,
          of: { generation: g.name, reason: snap.reason, ...(this.lastState ? { before: this.lastState } : {}) },
        });
    }
    const segments = listSegments(g);
    const resumeFrom = Math.max(0, read.segments.length - 1);
    if (!unchanged(read.segments.slice(0, resumeFrom), segments)) return false;
    for (let s = resumeFrom; s < segments.length; s++) {
      await this.clock.tick();
      const seg = segments[s]!;
      let seen = read.segments[s];
      if (seen && seen.name !== seg.name) return false;
      if (seen && sameStamp(seen, seg.indexPath)) continue;
      const stamp = stampOf(seg.indexPath);
      let bytes: Buffer;
      try {
        bytes = fs.readFileSync(seg.indexPath);
      } catch {
        bytes = Buffer.alloc(0);
      }
      this.reads.indexes++;
      if (!seen) {
        seen = { name: seg.name, ...stamp, goodBytes: 0, crc: 0, commits: 0 };
        read.segments.push(seen);
      }
      // Capture only appends to an index: the lines read before are still there, byte for byte.
      if (bytes.length < seen.goodBytes || zlib.crc32(bytes.subarray(0, seen.goodBytes)) !== seen.crc) return false;
      const index = parseIndex(bytes);
      if (index.commits.length < seen.commits) return false;
      Object.assign(seen, stamp, { goodBytes: index.goodBytes, crc: zlib.crc32(bytes.subarray(0, index.goodBytes)) });
      for (let n = seen.commits; n < index.commits.length; n++) {
        const c = index.commits[n]!;
        const base = snap.base?.segment === seg.name && n === 0;
        // A base commit carries its snapshot's time; the restore made it when the generation before ended.
        const at = base ? Math.max(this.prevEnd ?? c.at, this.lastAt) : c.at;
        this.lastAt = Math.max(this.lastAt, at);
        const cid = `${g.name}.${seg.name}.${n}`;
        commits.push({ id: cid, prev: read.state, at, base });
        read.state = cid;
        const last = groups.at(-1);
        if (last && !last.snapshot && last.at === at) last.commits.push(commits.length - 1);
        else groups.push({ at, commits: [commits.length - 1], rows: [], snapshot: false });
      }
      this.reads.commits += index.commits.length - seen.commits;
      seen.commits = index.commits.length;
      this.bounded();
    }
    read.endedAt = g.end?.endedAt;
    this.prevEnd = g.end?.endedAt;
    this.lastState = read.state;
    return true;
  }

  /** Reads the rows added since; true when they were all read again (the first time, or rows were pruned). */
  private async readRows(rows: ActivityRows): Promise<boolean> {
    const read = await readRowsOn(rows, this.order, this.id, {
      counted: (n, held) => {
        this.reads.rows += n;
        this.bounded(held);
      },
      tick: () => this.clock.tick(),
    });
    this.order = read.order;
    return read.fresh;
  }
}
