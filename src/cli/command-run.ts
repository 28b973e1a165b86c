import { InvalidArgumentError, type Command } from 'commander';

// What every command declaration shares: the entry a command's module exports, how main runs it,
// the wrapper that defers loading it until it runs, and the parsers of flag values.

/**
 * A command's entry as its module exports it: main hands it the context, the parsed flags and
 * the arguments, and exits with what it answers. (`never` parameters: each command names its
 * own flags type, and every such function fits here.)
 */
export type Handler = (ctx: never, flags: never, ...args: never[]) => Promise<number>;

/** How main runs a command once commander has parsed its command line. */
export type Dispatch = (command: Command, args: unknown[], load: () => Promise<Handler>, needs: { config: boolean }) => Promise<void>;

/**
 * Wraps a command's loader as its commander action: main's {@link Dispatch} gets the parsed
 * command, its arguments and the loader. `needs.config: false` for a command that reads no
 * settings (`tools`).
 */
export type Run = (load: () => Promise<Handler>, needs?: { config: boolean }) => (...args: unknown[]) => Promise<void>;

/** `--timeout`'s value: seconds above 0. */
export function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('It takes a number of seconds above 0.');
  return n;
}

/** `--limit`'s value: a whole number above 0. */
export function count(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('It takes a whole number above 0.');
  return n;
}
