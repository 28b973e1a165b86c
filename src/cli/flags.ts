import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * `parseArgs` that answers bad flags (unknown, missing a value) with node's message instead of
 * a throw, so each command can print it under its own name and exit 2.
 */
export function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> | string {
  try {
    return parseArgs(config);
  } catch (err) {
    return (err as Error).message;
  }
}
