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
 * page reads only what changed since (one per shard worker: its databases). Bounded, least
 * recently listed out first, by databases and by commits and rows held. The one listed last
 * stays however large the bound (its next page would read all of it again: 4 s at 200,000
 * commits), up to `ACTIVITY_READ_LIMIT`, past which no history is read (issue 29): at most
 * about 95 MB. Listing another database drops it first; its next page reads it all again and
 * is charged for it. Pages of one database wait for each other: a page reads its history while
 * the next reads it on. A workspace keeps at most `perWorkspace` of the databases: past that its
 * own least recently listed go first, so a tenant listing many databases evicts only its own and
 * never sends another's pages back to the whole read (review R29 M3).
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
    let items = 0;
    for (const { history } of this.held.values()) items += history.commits.length + history.order.length;
    for (const [key, { history }] of this.held) {
      if (this.held.size <= this.limits.databases && items <= this.limits.items) break;
      if (key === keep) continue;
      this.held.delete(key);
      items -= history.commits.length + history.order.length;
    }
  }
}
