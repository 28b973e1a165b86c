import { AgentDbError } from '../errors.ts';
import { ConcurrentSlots } from '../policy/concurrent-slots.ts';

/**
 * The inbox's live event streams open at once, per member, per workspace and in the process. A
 * stream holds a connection for as long as its page is open, and asks the registry about its
 * member on each heartbeat and each approval event. Behind a proxy only the process's total of
 * connections applies (HTTP_MAX_CONNECTIONS), so without these one member opening streams from a
 * script could hold every connection of the process, and each approval event of their workspace
 * cost one lookup per stream. A person with a few tabs open never meets them; half the default
 * connection total stays for everything else.
 */
export const INBOX_STREAM_BOUNDS = { perCaller: 8, perWorkspace: 64, total: 4_096 } as const;

/** Seconds a refused stream is told to wait (Retry-After); the page's own retry is 2 s. */
export const INBOX_STREAM_RETRY_AFTER_S = 30;

/** Live inbox streams open, at {@link INBOX_STREAM_BOUNDS}; past one RATE_LIMITED with `retryAfter`. */
export function inboxStreamSlots(bounds: { perCaller: number; perWorkspace: number; total: number } = INBOX_STREAM_BOUNDS): ConcurrentSlots {
  return new ConcurrentSlots(bounds, ({ of, underWay }) => {
    const who = of === 'caller' ? 'You have' : of === 'workspace' ? 'Your workspace has' : 'The server has';
    return new AgentDbError(
      'RATE_LIMITED',
      `${who} ${underWay} live inbox ${underWay === 1 ? 'page' : 'pages'} open, the most allowed at once; close one, or reload to see new approvals`,
      { retryAfter: INBOX_STREAM_RETRY_AFTER_S },
    );
  });
}
