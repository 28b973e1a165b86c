import { AgentDbError } from '../errors.ts';
import {
  activityReadPoints,
  approvalPagePoints,
  CALL_POINTS,
  LOOKUP_POINTS,
  RESTORE_DRY_RUN_POINTS,
  RESTORE_POINTS,
  rateRefusalDetail,
  restoredPoints,
  type RateRefusal,
} from './call-rate-limits.ts';

/**
 * Counts `points` of a member's lookups (a lookup's tenth of a call when absent) against their
 * and their workspace's rate limits; answers the refusal past one (`KeyedCalls.chargeMemberLookup`).
 */
export type ChargeMemberLookup = (workspace: string, member: string, points?: number) => Promise<RateRefusal | undefined>;

/**
 * Runs `read`, a page of a database's activity (or a history's last commits, read from it),
 * charged as every adapter charges it: a lookup first (or `first` points), refused past the member's or workspace's
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
  first?: number,
): Promise<{ limited: RateRefusal } | { page: T }> {
  const limited = await charge?.(member.workspace, member.name, first);
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
 * Runs `restore`, charged as its adapters must charge it, one rule for the API's route, the web
 * page's restore forms and its activity list's restore and fork. A dry run plans the restore and
 * lists what it would take away from a page of the activity list: charged {@link RESTORE_DRY_RUN_POINTS}
 * before it runs, then as that page is ({@link chargedActivityRead}). A restore itself is charged
 * {@link RESTORE_POINTS} before it runs, and a call per MiB of the moment it writes
 * (`restoredPoints`) before it writes it too: `restore` is given the bytes paid for so far, and
 * the worker, once its plan knows the moment's size, runs nothing bigger and answers `unpaid`
 * (that size); the rest is charged, and the restore sent again with it paid. Refused past the
 * member's or workspace's rate with nothing restored. Charged after the run, one restore of a
 * large database admitted at a window's end spent the next window (session 34, T12's leftover).
 * Uncharged, one admin's restore loop doubled another workspace's reads on the shard (session
 * 33, T11). Each round pays at least a call more, so the rate ends the rounds of a moment that
 * keeps growing; whatever a worker ran unasked (one without a quota plans no size first) is
 * charged after, as before.
 */
export async function chargedRestore<T extends { restoredBytes?: number; unpaid?: number }>(
  charge: ChargeMemberLookup | undefined,
  member: { workspace: string; name: string },
  dryRun: boolean,
  restore: (onRead?: (items: number) => void, paidBytes?: number) => Promise<T>,
): Promise<{ limited: RateRefusal } | { page: T }> {
  if (dryRun) return chargedActivityRead(charge, member, restore, activityReadPoints, RESTORE_DRY_RUN_POINTS);
  const limited = await charge?.(member.workspace, member.name, RESTORE_POINTS);
  if (limited) return { limited };
  // No rate (a server without limits): nothing to pay, the worker is not asked.
  let paid = charge ? 0 : undefined;
  for (;;) {
    const done = await restore(undefined, paid);
    if (done.unpaid === undefined) {
      const extra = restoredPoints(done.restoredBytes ?? 0) - restoredPoints(paid ?? 0);
      if (extra > 0) await charge?.(member.workspace, member.name, extra);
      return { page: done };
    }
    const more = await charge?.(member.workspace, member.name, restoredPoints(done.unpaid) - restoredPoints(paid ?? 0));
    if (more) return { limited: more };
    paid = done.unpaid;
  }
}

/**
 * The RATE_LIMITED error of a restore (or its dry run) refused by {@link chargedRestore}: whose
 * budget, what a restore counts, and when to try again (`retryAfter`: 429 and Retry-After).
 */
export function restoreRateLimited(r: RateRefusal, dryRun: boolean): AgentDbError {
  const whose = r.of === 'workspace' ? 'The workspace' : 'This member';
  const what = dryRun
    ? `a dry run counts ${RESTORE_DRY_RUN_POINTS / CALL_POINTS} before it runs, and a call more per 10,000 commits and rows it read afresh; nothing was planned`
    : `a restore counts ${RESTORE_POINTS / CALL_POINTS} before it runs, and a call more per MiB it restores; nothing was restored`;
  return new AgentDbError('RATE_LIMITED', rateRefusalDetail(r, whose, what, 'try again'), { retryAfter: r.retryAfterS });
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

/**
 * What a person's consent to an OAuth app (the consent page's Allow) counts against their and
 * their workspace's rates, in points: a call. It makes a grant and its code and ends the member's
 * oldest grant past 50, about 16 Redis commands; uncharged, one signed-in member posted it 222
 * times a second from one process (hostile review T14). A person consents once per app.
 */
export const CONSENT_POINTS = CALL_POINTS;

/**
 * What showing the consent page (its GET) counts, in points: a lookup, as a grid page or an
 * approval's page. It reads the app's client record and, for a client id that is a URL not seen
 * yet, fetches its metadata document and keeps it; uncharged, a signed-in member could ask for
 * it in a loop outside every rate (session 35, T14's leftover).
 */
export const CONSENT_PAGE_POINTS = LOOKUP_POINTS;

/**
 * Charges a consent ({@link CONSENT_POINTS}; the page alone, `page`: {@link CONSENT_PAGE_POINTS}) to
 * `member`; `charge` absent (no rate limits): not counted.
 * @throws AgentDbError RATE_LIMITED (with `retryAfter`: 429 and Retry-After) past the member's or workspace's rate; no grant is made.
 */
export async function chargeConsent(charge: ChargeMemberLookup | undefined, member: { workspace: string; name: string }, page = false): Promise<void> {
  const limited = await charge?.(member.workspace, member.name, page ? CONSENT_PAGE_POINTS : CONSENT_POINTS);
  if (!limited) return;
  const whose = limited.of === 'workspace' ? 'The workspace' : 'This member';
  const what = page ? 'showing the consent page counts a tenth of a call' : 'connecting an app counts a call; nothing was granted';
  throw new AgentDbError('RATE_LIMITED', rateRefusalDetail(limited, whose, what, page ? 'open it again' : 'allow it again'), {
    retryAfter: limited.retryAfterS,
  });
}
