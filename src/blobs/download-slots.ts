import { AgentDbError } from '../errors.ts';
import { ConcurrentSlots } from '../policy/concurrent-slots.ts';

/**
 * Downloads of offloaded results under way at once, per caller, per workspace and in the
 * process. A download streams its result from the blob store for as long as its client takes to
 * read it, holding a connection to the store all that time: the S3 client keeps 50 (the AWS
 * SDK's default), and in the hostile review (session 30, T7) one agent's 50 downloads of a 16 MB
 * result that read nothing held all of them, and every other workspace's download waited for one
 * that never came back. The process is shared by every workspace, so one caller or one workspace
 * may hold only a few; someone fetching a result or two never meets these bounds. The total stays
 * below the S3 client's connections, so other steps of the process still find one.
 */
export const DOWNLOAD_BOUNDS = { perCaller: 4, perWorkspace: 8, total: 32 } as const;

/** Seconds a refused download is told to wait (Retry-After): about the length of a small download. */
export const DOWNLOAD_RETRY_AFTER_S = 5;

/**
 * Downloads of offloaded results under way, at {@link DOWNLOAD_BOUNDS}; past one RATE_LIMITED with
 * `retryAfter`. The total is shared between workspaces: see ConcurrentSlots.
 */
export function downloadSlots(): ConcurrentSlots {
  return new ConcurrentSlots(DOWNLOAD_BOUNDS, ({ of, underWay }) => {
    const who = of === 'caller' ? 'This key' : of === 'workspace' ? 'This workspace' : 'The server';
    return new AgentDbError(
      'RATE_LIMITED',
      `${who} has ${underWay} ${underWay === 1 ? 'download' : 'downloads'} of offloaded results under way, the most allowed at once; try again in ${DOWNLOAD_RETRY_AFTER_S} s, once one has finished`,
      { retryAfter: DOWNLOAD_RETRY_AFTER_S },
    );
  });
}

/** RATE_LIMITED for a download cut off so that another workspace's could start (the process was full). */
export function downloadTakenBack(): AgentDbError {
  return new AgentDbError(
    'RATE_LIMITED',
    `this download of an offloaded result was stopped, not completed: the server was running all the downloads it runs at once and gave its place to another workspace, yours having more under way; try again in ${DOWNLOAD_RETRY_AFTER_S} s`,
    { retryAfter: DOWNLOAD_RETRY_AFTER_S },
  );
}

/** RESOURCE_LIMIT for a download cut off because its reader took nothing for `ms` (DOWNLOAD_STALL_SECONDS). */
export function downloadStalled(ms: number): AgentDbError {
  return new AgentDbError(
    'RESOURCE_LIMIT',
    `this download of an offloaded result was stopped, not completed: its reader took nothing for ${Math.round(ms / 1000)} s (DOWNLOAD_STALL_SECONDS), and a download held that way keeps a place other downloads need; read it again from the start`,
  );
}
