import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { CommandContext } from './main.ts';

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

/**
 * {@link parseFlags} for a command that has nothing to add to the message: on bad flags it
 * prints `agentdb <command>: <what is wrong>` and answers undefined, for the command to exit 2.
 */
export function commandFlags<T extends ParseArgsConfig>(ctx: CommandContext, command: string, config: T): ReturnType<typeof parseArgs<T>> | undefined {
  const parsed = parseFlags(config);
  if (typeof parsed !== 'string') return parsed;
  ctx.stderr.write(`agentdb ${command}: ${parsed}\n`);
  return undefined;
}
