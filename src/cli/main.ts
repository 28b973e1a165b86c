import { CommanderError, type Command } from 'commander';
import { EXIT, UsageError, type CommandContext, type Output } from './context.ts';
import { packageVersion } from './package-version.ts';
import { nodeCheck } from '../doctor/host-checks.ts';
import type { Dispatch } from './command-run.ts';
import { buildProgram } from './program.ts';

/**
 * The `agentdb` entry point: parses the command line, loads the configuration once (for the
 * commands that use it) and runs one command. Everything a person can get wrong on the
 * command line is answered in one plain line under the command's name, with exit 2.
 * @returns the process exit code.
 */
export async function main(
  argv: string[],
  io: Output = { stdout: process.stdout, stderr: process.stderr },
  nodeVersion = process.versions.node,
): Promise<number> {
  let exitCode: number = EXIT.ok;
  const dispatch: Dispatch = async (command, args, load, needs) => {
    // On a Node agentdb cannot run on, the server's executor children crashed one after another
    // with nothing saying why: every command says so first (help and --version still answer).
    const node = nodeCheck(nodeVersion);
    if (node.status === 'fail') {
      io.stderr.write(`${name(command)}: ${node.detail} ${node.fix}\n`);
      exitCode = EXIT.usage;
      return;
    }
    let ctx: Output | CommandContext = io;
    if (needs.config) {
      const config = await loadConfigOrSay(io);
      if (!config) {
        exitCode = EXIT.usage;
        return;
      }
      ctx = { ...io, config };
    }
    const handler = (await load()) as unknown as (ctx: Output, flags: unknown, ...args: unknown[]) => Promise<number>;
    try {
      exitCode = await handler(ctx, command.opts(), ...args);
    } catch (err) {
      exitCode = await explain(err, command, io);
    }
  };
  const program = buildProgram(packageVersion(), dispatch);
  for (const command of everyCommand(program)) {
    command.exitOverride().configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      // commander says `error: …`; say it under the command's name, with where its usage is.
      outputError: (text, write) => write(`${name(command)}: ${text.replace(/^error: /, '')}${seeHelp(command)}`),
    });
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // --help and --version exit 0; help shown for a missing command, and every error, 2.
    return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  return exitCode;
}

/** The configuration, or undefined once the reason it is bad has been printed. */
async function loadConfigOrSay(io: Output) {
  const { ConfigError, loadConfig } = await import('../config.ts');
  try {
    return loadConfig(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr.write(`agentdb: ${err.message}\n`);
    return undefined;
  }
}

/**
 * The exit code for what a command threw, once said in one line: a bad command line (2), a
 * service that did not answer or refuses writes for now (3), or another coded error (its status by
 * `exitFor`). Anything else is a fault of agentdb's own, and keeps its stack trace for the report.
 */
async function explain(err: unknown, command: Command, io: Output): Promise<number> {
  // Loaded here, not at start: the command that threw has loaded the registry already.
  const [{ isErrorCode }, { exitFor }] = await Promise.all([import('../errors.ts'), import('./exit-status.ts')]);
  if (err instanceof UsageError) {
    io.stderr.write(`${name(command)}: ${err.message}\n${seeHelp(command)}`);
    return EXIT.usage;
  }
  const { code, detail, message, retryAfter } = (err ?? {}) as { code?: unknown; detail?: unknown; message?: unknown; retryAfter?: unknown };
  if (code === 'UNAVAILABLE' && typeof detail === 'string') {
    io.stderr.write(`${name(command)}: ${detail}\n`);
    return exitFor('UNAVAILABLE');
  }
  // Redis answers but refuses writes (its own disk): said with its code, whether its first PING
  // heard it (redis/connection.ts, writesRefused) or a command past it did (a bare MISCONF reply).
  if (code === 'REDIS_REFUSES_WRITES' && typeof detail === 'string') {
    io.stderr.write(`${name(command)}: REDIS_REFUSES_WRITES: ${detail}\n`);
    return exitFor('REDIS_REFUSES_WRITES');
  }
  if (typeof message === 'string' && message.startsWith('MISCONF')) {
    io.stderr.write(
      `${name(command)}: REDIS_REFUSES_WRITES: Redis answers, but refuses writes: it could not write to its own disk (${message}). Free space on the disk of Redis's folder (its AOF and RDB files), or fix what Redis's log names; it takes writes again by itself once a write to its disk works. What the command had done before it is kept.\n`,
    );
    return exitFor('REDIS_REFUSES_WRITES');
  }
  // A coded error no command answered itself: said with its code, and its status as any command's.
  if (isErrorCode(code) && code !== 'INTERNAL' && typeof detail === 'string') {
    io.stderr.write(`${name(command)}: ${code}: ${detail}\n`);
    return exitFor(code, typeof retryAfter === 'number' ? retryAfter : undefined);
  }
  throw err;
}

/** `agentdb members add`: the command's full name, as a person typed it. */
function name(command: Command): string {
  const parts: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) parts.unshift(c.name());
  return parts.join(' ');
}

function seeHelp(command: Command): string {
  return `Run '${name(command)} --help' for its usage.\n`;
}

function* everyCommand(command: Command): Generator<Command> {
  yield command;
  for (const sub of command.commands) yield* everyCommand(sub);
}
