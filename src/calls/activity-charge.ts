import { activityReadPoints, approvalPagePoints, type RateRefusal } from './call-rate-limits.ts';

/**
 * Counts `points` of a member's lookups (a lookup's tenth of a call when absent) against their
 * and their workspace's rate limits; answers the refusal past one (`KeyedCalls.chargeMemberLookup`).
 */
export type ChargeMemberLookup = (workspace: string, member: string, points?: number) => Promise<RateRefusal | undefined>;

/**
 * Runs `read`, a page of a database's activity (or a history's last commits, read from it),
 * charged as every adapter charges it: a lookup first, refused past the member's or workspace's
 * rate with nothing read; then, once the work is known, a call per 10,000 commits and rows read
 * afresh (`activityReadPoints`; what each `onRead` heard, summed), whether the page was made or
 * refused for its size, so a page that read the whole history spends the budget its next pages
 * are refused by (issue 29). One function, so the API's page and the web page cannot charge
 * differently (they did the same in two copies). `charge` absent (a server without rate limits):
 * not counted.
 * @returns `{ limited }` when the lookup was refused, else `{ page }`; `read`'s errors propagate.
 */
export async function chargedActivityRead<T>(
  charge: ChargeMemberLookup | undefined,
  member: { workspace: string; name: string },
  read: (onRead: (items: number) => void) => Promise<T>,
  points: (items: number) => number = activityReadPoints,
): Promise<{ limited: RateRefusal } | { page: T }> {
  const limited = await charge?.(member.workspace, member.name);
  if (limited) return { limited };
  let items = 0;
  try {
    return { page: await read((n) => (items += n)) };
  } finally {
    const extra = points(items);
    if (extra > 0) await charge?.(member.workspace, member.name, extra);
  }
}

/**
 * Runs `read`, a page of a workspace's approvals (the inbox: its pending and decided lists), charged
 * as {@link chargedActivityRead} charges a page of activity: a lookup first, then a call per 1,000
 * entries of the workspace's indexes read (`approvalPagePoints`).
 */
export function chargedApprovalPage<T>(
  charge: ChargeMemberLookup | undefined,
  member: { workspace: string; name: string },
  read: (onRead: (entries: number) => void) => Promise<T>,
): Promise<{ limited: RateRefusal } | { page: T }> {
  return chargedActivityRead(charge, member, read, approvalPagePoints);
}

/**
 * Runs `restore`, charged as its adapters must charge it: a dry run lists what it would take away
 * from a page of the activity list, so it is charged as that page is ({@link chargedActivityRead}:
 * a loop of dry runs read the list past the rate the activity route refuses at); a restore itself
 * is an admin's write, bounded by one running at a time, and not charged. One rule for the API's
 * route and the web page.
 */
export async function chargedRestore<T>(
  charge: ChargeMemberLookup | undefined,
  member: { workspace: string; name: string },
  dryRun: boolean,
  restore: (onRead?: (items: number) => void) => Promise<T>,
): Promise<{ limited: RateRefusal } | { page: T }> {
  return dryRun ? chargedActivityRead(charge, member, restore) : { page: await restore() };
}

/**
 * Runs `read`, one approval read whole (`GET /v1/approvals/:id`, the inbox's approval page: its
 * record, up to ~1 MB of SQL and params, and its standing), charged a lookup first, as a lookup of
 * a call is; refused past the member's or workspace's rate with nothing read. Uncharged, a member
 * read a big record in a loop for free (session 31, T8).
 */
export function chargedApprovalRead<T>(
  charge: ChargeMemberLookup | undefined,
  member: { workspace: string; name: string },
  read: () => Promise<T>,
): Promise<{ limited: RateRefusal } | { page: T }> {
  return chargedActivityRead(charge, member, read, () => 0);
}
