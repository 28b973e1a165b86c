import { isRetryable, type ErrorCode } from '../errors.ts';
import { EXIT } from './context.ts';

/**
 * The codes that say the command cannot run as given: its input was not valid (a flag's value
 * the core checks, a call's arguments, a tool's name), or its settings are not the service's
 * (SHARD_COUNT: CONFIG_MISMATCH). Nothing was done, as with a usage error or a bad setting.
 */
const USAGE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['INVALID_ARGUMENTS', 'UNKNOWN_TOOL', 'CONFIG_MISMATCH']);

/**
 * The exit status of a command that answered `code`, the same whichever command answers it, so
 * that a script knows without reading the JSON whether to fix its command line (2), try again
 * later (3: the registry's `retryable`, a service that did not answer among them, or an answer
 * saying when it may be sent again, `retryAfter`, as HTTP's 429) or give up (1).
 */
export function exitFor(code: ErrorCode, retryAfter?: number): number {
  if (USAGE_CODES.has(code)) return EXIT.usage;
  return isRetryable(code) || retryAfter !== undefined ? EXIT.unavailable : EXIT.failed;
}

/**
 * The exit status of a command that answers for many (a `--batch`, `backup now`, `restore
 * --all`), given those that failed: 0 for none; 3 when each failure may pass later,
 * so the whole command may; otherwise 1, whatever else failed beside it.
 */
export function exitForAll(failures: readonly Failure[]): number {
  if (!failures.length) return EXIT.ok;
  return failures.every((f) => exitFor(f.code, f.retryAfter) === EXIT.unavailable) ? EXIT.unavailable : EXIT.failed;
}

/** What a failure's exit status is read from: its code, and when it may be sent again. */
export interface Failure {
  code: ErrorCode;
  retryAfter?: number | undefined;
}
