import type { Keys } from '../redis/keys.ts';
import type { ScriptedRedis } from '../redis/lua-scripts.ts';
import { passes, type ApprovalFacets, type ApprovalFilter, type ListCursor } from './approval-listing.ts';
import type { ApprovalState } from './approval.ts';
import { readFacets } from './approval-facets-read.ts';

/** Index entries one list page may look at: a page's cost is bounded whatever the index holds. */
const SCAN_PER_PAGE = 5000;
const SCAN_BATCH = 500;

/**
 * One list page's walk down a workspace's index (see `ApprovalPages.scan`), newest first from
 * `cursor`: the entries of up to `limit` of its approvals in `state` that pass `filter`, chosen
 * from their small fields, and where the next page starts (none once the index is walked to its
 * end). It looks at no more than SCAN_PER_PAGE entries; a page that met that many not matching
 * comes back short with `next`. `pending`: the index is of pending approvals only.
 */
export async function walkIndex(
  redis: ScriptedRedis,
  keys: Keys,
  index: string,
  opts: {
    workspace: string;
    state: ApprovalState | 'all';
    limit: number;
    cursor?: ListCursor;
    filter?: ApprovalFilter;
    pending: boolean;
    /** Hears how many entries the walk looked at (at most SCAN_PER_PAGE and a batch). */
    onRead?: (entries: number) => void;
  },
): Promise<{ chosen: ListCursor[]; next?: ListCursor }> {
  const chosen: ListCursor[] = [];
  // Where the walk is: entries at its score with ids at or above its id are behind it. Each read
  // starts at that score again (not at an offset, which entries decided, pruned or made
  // meanwhile would shift) and skips those, `passed` of which it knows of.
  let at = opts.cursor;
  let passed = 0;
  let read = 0;
  let ended = false;
  while (chosen.length < opts.limit && read < SCAN_PER_PAGE) {
    const want = SCAN_BATCH + passed;
    const flat = await redis.zrevrangebyscore(index, at ? String(at.score) : '+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, want);
    const batch: ListCursor[] = [];
    for (let i = 0; i < flat.length; i += 2) batch.push({ id: flat[i]!, score: Number(flat[i + 1]) });
    read += batch.length;
    ended = batch.length < want;
    // Equal scores come by descending id: those at the walk's score down to its id are behind it.
    const from = at;
    const fresh = from ? batch.filter((e) => e.score < from.score || e.id < from.id) : batch;
    const rows = await facetsOf(
      redis,
      keys,
      index,
      fresh.map((e) => e.id),
      opts.pending,
    );
    for (let j = 0; j < fresh.length && chosen.length < opts.limit; j++) {
      const entry = fresh[j]!;
      at = entry;
      const row = rows[j];
      // The index is the workspace's own; the check keeps a listing to it whatever the index holds.
      if (row?.workspace !== opts.workspace) continue;
      if (opts.state !== 'all' && row.state !== opts.state) continue;
      if (opts.filter && !passes(row, opts.filter)) continue;
      chosen.push(entry);
    }
    const now = at;
    passed = now ? batch.filter((e) => e.score === now.score && e.id >= now.id).length : 0;
    if (ended) break;
  }
  opts.onRead?.(read);
  const next = chosen.length >= opts.limit ? chosen.at(-1) : ended ? undefined : at;
  return { chosen, ...(next ? { next } : {}) };
}

/**
 * The facets of an index's entries, undefined for one that no longer belongs there, which is
 * dropped from the index: a record pruned, or, in an index of pending ones, one decided by an
 * older process, whose script did not know the index.
 */
async function facetsOf(redis: ScriptedRedis, keys: Keys, index: string, ids: string[], pending: boolean): Promise<(ApprovalFacets | undefined)[]> {
  const rows = (await readFacets(redis, keys, ids)).map((row) => (row && (!pending || row.state === 'pending') ? row : undefined));
  const stale = ids.filter((_, i) => !rows[i]);
  if (stale.length) await redis.zrem(index, ...stale);
  return rows;
}
