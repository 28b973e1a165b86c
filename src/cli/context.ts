import type { Config } from '../config.ts';

/** Where a command writes: the process's own streams, or a test's. */
export interface Output {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/**
 * What a command that reaches Redis or the data gets: the configuration, validated once by
 * `main` before the command runs, and where to write.
 */
export interface CommandContext extends Output {
  config: Config;
}

/**
 * Exit codes every command keeps to, as docs/errors.md ("Exit status") lists them; a command
 * answering an error code takes its status from `exitFor` (exit-status.ts), never a number of its own.
 */
export const EXIT = {
  ok: 0,
  /** Refused or failed: sent again as it is, it fails again (the registry's `retryable: false`). */
  failed: 1,
  /** The command line (or a call's input on it, INVALID_ARGUMENTS, UNKNOWN_TOOL) is wrong: nothing was done. */
  usage: 2,
  /** Not now: a service it needs did not answer, or the code is `retryable`; the same command may pass later. */
  unavailable: 3,
  /** Stopped by Ctrl-C (128 + SIGINT). */
  interrupted: 130,
} as const;

/**
 * A command line that cannot run as given, found by a command after the flags parsed (a flag's
 * value, a missing required flag, malformed JSON). `main` prints it under the command's name
 * with a pointer to its `--help`, and exits 2 having done nothing.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
