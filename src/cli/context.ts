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

/** Exit codes every command keeps to, as the README and docs/calls.md promise them. */
export const EXIT = {
  ok: 0,
  /** The call or the operation failed, or a service it needs did not answer. */
  failed: 1,
  /** The command line is wrong: nothing was done. */
  usage: 2,
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
