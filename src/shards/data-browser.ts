import type { CsvChunk, GridPage, PageArgs, PageCursor } from '../contracts/browse.ts';
import { AgentDbError } from '../errors.ts';
import type { AgentRegistry } from '../registry/agents.ts';
import { checkMemberDatabase, type DataReader } from '../policy/member-databases.ts';
import { databaseId, parseDatabaseId, shardOf } from '../contracts/database-id.ts';
import type { DescribeResult } from '../sqlite/sqlite-describe.ts';
import type { DatabaseFigures } from '../sqlite/sqlite-figures.ts';
import { LOOKUP_POINTS, type RateRefusal } from '../calls/call-rate-limits.ts';
import type { ShardOpClient } from './shard-op-client.ts';
import { ExportSlots, exportTakenBack } from './export-slots.ts';
import { DEFAULT_STALL_MS, pieces } from '../policy/stall-deadline.ts';

/** Where one chunk of an export starts and ends (see `csvChunk`). */
interface CsvRange {
  after?: PageCursor;
  until?: PageCursor;
  offset?: number;
  bounds?: number;
}

/** Chunks of an export asked for at once: one formatting while one travels. */
const IN_FLIGHT = 2;
/** Bounds a chunk gives past itself: ranges asked for before the chunk before them arrives. */
const BOUNDS = 16;

/**
 * How long the Data page shows a database's figures again before they are counted anew: each
 * count reads every table up to its cap on an executor, and a member reloading the page (or
 * holding F5) made it count every database of the workspace each time (review 19, H29).
 */
export const FIGURES_KEEP_MS = 30_000;

/** Databases whose figures are kept at most; past it all are forgotten at once. */
const FIGURES_KEPT_MAX = 10_000;

/** Databases whose figures {@link DataBrowser.figuresOf} asks their owners for at once. */
const FIGURES_AT_ONCE = 8;

/** One database a workspace's members may browse. */
export interface BrowsableDatabase {
  /** `<workspace>` (the shared one) or `<workspace>/<agent>`. */
  id: string;
  agent?: string;
  /** Registered in the agent registry (else known from its file only). */
  registered: boolean;
}

/** Options of a {@link DataBrowser}. */
export interface DataBrowserOptions {
  ops: ShardOpClient;
  agents: AgentRegistry;
  shardCount: number;
  /** How long one read may wait for the shard's owner. */
  timeoutMs?: number;
  /** How long a database's figures are kept and shown again (default {@link FIGURES_KEEP_MS}). */
  figuresKeepMs?: number;
  /**
   * Characters of CSV per job (default 2 Mi): one job per chunk, so larger chunks pay the
   * queue's round trip less often, and smaller ones hold less in memory.
   */
  csvChunkChars?: number;
  /** Exports under way at once (see export-slots.ts); default: a process's own, at the default bounds. */
  exports?: ExportSlots;
  /** The most one export sends, in UTF-8 bytes (EXPORT_MAX_BYTES; default {@link EXPORT_MAX_BYTES}). */
  exportMaxBytes?: number;
  /** How long an export's reader may take nothing before it is cut off (DOWNLOAD_STALL_SECONDS; default {@link DEFAULT_STALL_MS}). */
  stallMs?: number;
}

/** EXPORT_MAX_BYTES's default: 2 GiB, about twice the CSV of the largest plan's database. */
export const EXPORT_MAX_BYTES = 2 * 1024 ** 3;

/**
 * What a person browsing a workspace's data reads: its databases, their tables, a grid page, a
 * CSV export. Every read is a shard op on the database's owner (browse-ops.ts); an op's refusal
 * (no such table) comes back as an `AgentDbError` with its code.
 */
export class DataBrowser {
  /** Figures by database, as the promise of their count (one count for reloads at once), and when it began. */
  private readonly figuresKept = new Map<string, { at: number; figures: Promise<DatabaseFigures> }>();

  /** The agents with a database file, by workspace, and when they were asked for ({@link agentsOnDisk}). */
  private readonly filesKept = new Map<string, { at: number; agents: string[] }>();

  private readonly exports: ExportSlots;

  constructor(private readonly opts: DataBrowserOptions) {
    this.exports = opts.exports ?? new ExportSlots();
  }

  /**
   * The shared database and each agent's: the registered agents, and the agents with a file on
   * disk (agents called by a runtime with settings of their own are in no registry). A shard
   * without a live owner is skipped, not waited for.
   */
  async databases(workspace: string, now = Date.now()): Promise<BrowsableDatabase[]> {
    databaseId(workspace);
    const registered = await this.opts.agents.list(workspace).catch(() => []);
    const agents = new Map<string, boolean>(registered.map((a) => [a.slug, true]));
    for (const a of await this.agentsOnDisk(workspace, now)) if (!agents.has(a)) agents.set(a, false);
    const list: BrowsableDatabase[] = [{ id: workspace, registered: true }];
    for (const [agent, reg] of [...agents].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      list.push({ id: databaseId(workspace, agent), agent, registered: reg });
    }
    return list;
  }

  /**
   * The agents of `workspace` with a database file, asked of every shard's owner (one shard op
   * each) and kept `figuresKeepMs` (30 s) as the figures are: asked anew on each view, one member
   * reloading the Data page sent SHARD_COUNT (16) shard ops a view for a lookup's tenth of a call
   * (session 31, T8). A shard that does not answer is left out, and the list not kept then.
   */
  private async agentsOnDisk(workspace: string, now: number): Promise<string[]> {
    const kept = this.filesKept.get(workspace);
    if (kept && this.fresh(kept.at, now)) return kept.agents;
    const shards = Array.from({ length: this.opts.shardCount }, (_, i) => i);
    const onDisk = await Promise.all(shards.map((s) => this.opts.ops.run(s, 'browse.files', { workspace }, { timeoutMs: 5000 }).catch(() => undefined)));
    const agents = onDisk.flatMap((out) => (out?.ok ? (out.result as { agents: string[] }).agents : []));
    if (onDisk.every((out) => out?.ok)) {
      if (this.filesKept.size >= FIGURES_KEPT_MAX) this.filesKept.clear();
      this.filesKept.set(workspace, { at: now, agents });
    }
    return agents;
  }

  /** Tables and views of `db` with columns and row counts. @throws AgentDbError NOT_PERMITTED for a database not of `by`'s workspace. */
  async tables(db: string, by: DataReader): Promise<DescribeResult> {
    checkMemberDatabase(by, db);
    return (await this.run(db, 'browse.tables', {})) as DescribeResult;
  }

  /**
   * Size, tables, rows (counted up to a cap) and last write of `db` (see `databaseFigures`),
   * as counted in the last `figuresKeepMs` (30 s) when they were: the page may be that stale.
   */
  async figures(db: string, now = Date.now()): Promise<DatabaseFigures> {
    const kept = this.figuresKept.get(db);
    if (kept && this.fresh(kept.at, now)) return kept.figures;
    if (this.figuresKept.size >= FIGURES_KEPT_MAX) this.figuresKept.clear();
    const figures = this.run(db, 'browse.figures', {}, 5000) as Promise<DatabaseFigures>;
    this.figuresKept.set(db, { at: now, figures });
    // A failed count is not kept: the next view asks again.
    figures.catch(() => {
      if (this.figuresKept.get(db)?.figures === figures) this.figuresKept.delete(db);
    });
    return figures;
  }

  /**
   * The figures of `dbs` (the Data page's list), each counted on its owner as a tables view counts
   * rows there: `charge` is asked first for a lookup's points (a tenth of a call) per database not
   * counted in the last `figuresKeepMs`, and refused, only the kept ones are given, with the
   * refusal. Uncharged, one list view of a workspace of a thousand databases ran a thousand shard
   * ops every 30 s for a tenth of a call (session 30, T7). A database whose owner does not answer
   * is left out (the page shows dashes), not an error for the whole list.
   */
  async figuresOf(
    dbs: readonly string[],
    charge: (points: number) => Promise<RateRefusal | undefined>,
    now = Date.now(),
  ): Promise<{ figures: Map<string, DatabaseFigures>; limited?: RateRefusal }> {
    const kept = (db: string) => this.fresh(this.figuresKept.get(db)?.at ?? -Infinity, now);
    const asks = dbs.filter((db) => !kept(db)).length;
    const limited = asks > 0 ? await charge(asks * LOOKUP_POINTS) : undefined;
    const wanted = limited ? dbs.filter(kept) : dbs;
    const figures = new Map<string, DatabaseFigures>();
    for (let i = 0; i < wanted.length; i += FIGURES_AT_ONCE) {
      await Promise.all(
        wanted.slice(i, i + FIGURES_AT_ONCE).map(async (db) => {
          const f = await this.figures(db, now).catch(() => undefined);
          if (f) figures.set(db, f);
        }),
      );
    }
    return limited ? { figures, limited } : { figures };
  }

  /** One grid page (see `browsePage`). @throws AgentDbError NOT_PERMITTED for a database not of `by`'s workspace. */
  async page(db: string, args: PageArgs, by: DataReader): Promise<GridPage> {
    checkMemberDatabase(by, db);
    return (await this.run(db, 'browse.page', args)) as GridPage;
  }

  /**
   * The whole table as CSV text, chunk by chunk, each chunk one job on the owner. A chunk of a
   * table with a key also gives bounds (keys about a chunk apart) past itself, so the ranges
   * between them are asked for two at a time: the owner formats the next while this process
   * takes the last (asking only once a chunk arrived, the owner sat idle for each chunk's trip
   * through the queue, and exports ran at 0.45 of better-sqlite3 writing the CSV directly). A
   * range that does not fit in one chunk is continued before the ones after it. At most two
   * chunks wait in memory besides the one being sent, never the table. `onTotal` hears the row
   * count with the first chunk. `stop` is called if the export's slot is taken back for another
   * workspace while the process runs all the exports it may (export-slots.ts): the consumer ends
   * the download there (a slow reader would otherwise take the next chunk only much later), and the
   * next `next()` throws RATE_LIMITED. The export holds one of `by`'s slots (export-slots.ts) from its
   * first chunk asked for until it ends in any way: done, failed, or stopped by its consumer.
   * An export stops before a chunk that would take it past `exportMaxBytes`: a view's rows have no
   * bound of their own (an endless recursive view streamed on at ~5 MB/s, holding the database's
   * executor and filling the person's disk).
   * @throws ExportsBusyError (RATE_LIMITED) from the first `next()` when `by` has no slot left;
   * AgentDbError NOT_PERMITTED, before that, for a database not of `by`'s workspace; AgentDbError
   * RESOURCE_LIMIT past `exportMaxBytes`.
   */
  async *csv(db: string, table: string, by: DataReader, onTotal?: (rows: number) => void, stop?: () => void): AsyncGenerator<string> {
    checkMemberDatabase(by, db);
    let takenBack = false;
    const release = this.exports.take(by.workspace, by.member, () => {
      takenBack = true;
      stop?.();
    });
    const size = this.opts.csvChunkChars ? { maxChars: this.opts.csvChunkChars } : {};
    const fetch = (range: CsvRange) => this.run(db, 'browse.csv', { table, ...range, ...size }) as Promise<CsvChunk>;
    // In output order: chunks asked for, then ranges not asked for yet. The last range is open
    // (no `until`) and asks for more bounds.
    const asked: { range: CsvRange; chunk: Promise<CsvChunk> }[] = [];
    const ranges: CsvRange[] = [{ bounds: BOUNDS }];
    // A chunk asked ahead may fail while the download is slow to take the one before it (a shard op's
    // timeout, Redis closing): it is heard at once, or its rejection would be unhandled until then
    // and end the process; the loop still reads the failure when it comes to that chunk. So a
    // consumer that stops early (a closed download) leaves none unhandled either.
    const ask = (range: CsvRange) => {
      const chunk = fetch(range);
      chunk.catch(() => undefined);
      return { range, chunk };
    };
    const maxBytes = this.exportMaxBytes;
    let sent = 0;
    try {
      for (;;) {
        while (asked.length < IN_FLIGHT && ranges.length) asked.push(ask(ranges.shift()!));
        const head = asked.shift();
        if (!head) return;
        const chunk = await head.chunk;
        if (takenBack) throw exportTakenBack(table);
        if (chunk.total !== undefined) onTotal?.(chunk.total);
        const { next, bounds } = chunk;
        if (head.range.until) {
          // A range cut short by the chunk size: the rest of it comes before anything after it.
          if (next) asked.unshift(ask({ ...next, until: head.range.until }));
        } else if (next?.after && bounds?.length) {
          let from = next.after;
          for (const until of bounds) {
            ranges.push({ after: from, until });
            from = until;
          }
          ranges.push({ after: from, bounds: BOUNDS });
        } else if (next) {
          ranges.push({ ...next, bounds: BOUNDS });
        }
        sent += Buffer.byteLength(chunk.csv);
        if (sent > maxBytes) {
          throw new AgentDbError(
            'RESOURCE_LIMIT',
            `the export of ${JSON.stringify(table)} stopped before passing ${maxBytes} bytes, the most one export sends (EXPORT_MAX_BYTES); its download was cut off, not completed: export a narrower view or table, or ask the operator for a larger EXPORT_MAX_BYTES`,
          );
        }
        // In pieces, so that a slow reader's progress shows between them (stall-deadline.ts).
        yield* pieces(chunk.csv);
      }
    } finally {
      release();
    }
  }

  /** The most one export sends, in bytes (EXPORT_MAX_BYTES). */
  get exportMaxBytes(): number {
    return this.opts.exportMaxBytes ?? EXPORT_MAX_BYTES;
  }

  /** How long an export's reader may take nothing before the route cuts it off (DOWNLOAD_STALL_SECONDS). */
  get exportStallMs(): number {
    return this.opts.stallMs ?? DEFAULT_STALL_MS;
  }

  /** Whether what was counted at `at` is kept still at `now` (`figuresKeepMs`, 30 s). */
  private fresh(at: number, now: number): boolean {
    return now - at < (this.opts.figuresKeepMs ?? FIGURES_KEEP_MS);
  }

  private async run(db: string, op: string, args: unknown, timeoutMs = this.opts.timeoutMs ?? 30_000): Promise<unknown> {
    const { workspace, agent } = parseDatabaseId(db);
    const id = databaseId(workspace, agent);
    const out = await this.opts.ops.run(shardOf(id, this.opts.shardCount), op, args, { db: id, timeoutMs });
    if (!out.ok) throw new AgentDbError(out.error.code, out.error.detail);
    return out.result;
  }
}
