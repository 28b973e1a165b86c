import path from 'node:path';
import { ActivityHistory } from './activity-history.ts';

/**
 * How much of the databases' histories one {@link ActivityCache} keeps read: databases, and
 * their commits and rows together (measured: about 190 bytes of heap each, 14 MB for a database
 * of 40,000 commits; the whole bound about 45 MB a shard worker).
 */
export const ACTIVITY_CACHE = { databases: 32, items: 250_000, perWorkspace: 8 } as const;

/**
 * The {@link ActivityHistory} of the databases whose activity was listed lately, so that the next
 * page reads only what changed since (one per shard worker: its databases). Pages of one
 * database wait for each other: a page reads its history while the next reads it on. Bounded:
 * - a workspace keeps at most `perWorkspace` of the databases, its own least recently listed out
 *   first, so a tenant listing many databases evicts only its own (review R29 M3);
 * - past `databases` or the bound of commits and rows, the workspace holding the most gives up a
 *   history first, its least recently listed, the one just listed last (see `victim`);
 * - the one history left stays however large (its next page would read all of it again: 4 s at
 *   200,000 commits), up to `ACTIVITY_READ_LIMIT`, past which no history is read (issue 29): at
 *   most about 95 MB. A history dropped is read again whole by its next page, charged to it.
 */
export class ActivityCache {
  private readonly held = new Map<string, { history: ActivityHistory; turn: Promise<unknown>; workspace: string }>();

  constructor(private readonly limits: { databases: number; items: number; perWorkspace?: number } = ACTIVITY_CACHE) {}

  /** Runs `use` with database `id`'s history, after any page of it running. */
  async with<T>(dataDir: string, id: string, use: (history: ActivityHistory) => Promise<T>): Promise<T> {
    const key = path.join(path.resolve(dataDir), id);
    const entry = this.held.get(key) ?? { history: new ActivityHistory(dataDir, id), turn: Promise.resolve(), workspace: id.split('/')[0]! };
    // Deleted and set again: a Map keeps insertion order, so the first is the least recently listed.
    this.held.delete(key);
    this.held.set(key, entry);
    const run = entry.turn.then(
      () => use(entry.history),
      () => use(entry.history),
    );
    entry.turn = run.catch(() => undefined);
    try {
      return await run;
    } finally {
      this.trim(key);
    }
  }

  /** How many databases' histories are held. */
  get size(): number {
    return this.held.size;
  }

  private trim(keep: string): void {
    const workspace = this.held.get(keep)?.workspace;
    const own = [...this.held].filter(([key, e]) => key !== keep && e.workspace === workspace);
    for (const [key] of own.slice(0, Math.max(0, own.length + 1 - (this.limits.perWorkspace ?? ACTIVITY_CACHE.perWorkspace)))) this.held.delete(key);
    // The last one left stays however large (its bound is ACTIVITY_READ_LIMIT).
    while (this.held.size > 1) {
      let items = 0;
      for (const { history } of this.held.values()) items += itemsOf(history);
      const overCount = this.held.size > this.limits.databases;
      if (!overCount && items <= this.limits.items) return;
      this.held.delete(this.victim(keep, overCount));
    }
  }

  /**
   * Which history goes: the heaviest workspace's (by what it holds, or by its databases when
   * those are too many), its least recently listed first and the one just listed last. The
   * workspace that fills the cache pays with its own re-reads, charged to it, rather than sending
   * another's pages back to the whole read (review R29b M1: two big histories of one workspace
   * evicted every other workspace's, whose re-reads were then charged to them).
   */
  private victim(keep: string, byCount: boolean): string {
    const by = new Map<string, { items: number; keys: string[] }>();
    for (const [key, e] of this.held) {
      const w = by.get(e.workspace) ?? { items: 0, keys: [] };
      w.items += itemsOf(e.history);
      w.keys.push(key);
      by.set(e.workspace, w);
    }
    const heaviest = [...by.values()].reduce((a, b) => ((byCount ? b.keys.length > a.keys.length : b.items > a.items) ? b : a));
    return heaviest.keys.find((k) => k !== keep) ?? keep;
  }
}

/** What a kept history holds, as the bound counts it: its commits and rows. */
function itemsOf(history: ActivityHistory): number {
  return history.commits.length + history.order.length;
}
