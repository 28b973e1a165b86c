import { readFile } from 'node:fs/promises';
import { UsageError, type Output } from './context.ts';

/** The key flags of a command that takes a key. */
export interface KeyFlags {
  key?: string;
  keyFile?: string;
}

/** Where a command may read its key from besides its flags. */
export interface KeySource {
  /** The environment variable's name, for messages (AGENTDB_KEY, AGENTDB_MEMBER_KEY). */
  envName: string;
  /** Its value, from the validated config. */
  envValue: string | undefined;
  /** False when stdin carries something else (`mcp --stdio` speaks JSON-RPC on it). */
  stdinAllowed: boolean;
  /** Stdin, when `--key-file -` reads it (a test's stream, or the process's). */
  stdin?: NodeJS.ReadableStream;
}

/**
 * The key a command runs with: `--key-file PATH` (`-`: stdin), else `--key`, else the
 * environment variable; undefined when none is given. A key on the command line is in `ps`
 * output and shell history for anyone on the machine to read, so `--key` still works but warns
 * on stderr, and the docs show only the other two.
 * @throws UsageError for both flags at once, an unreadable or empty file, or stdin where it is
 *   the protocol.
 */
export async function keyFrom(flags: KeyFlags, source: KeySource, out: Pick<Output, 'stderr'>): Promise<string | undefined> {
  if (flags.key !== undefined && flags.keyFile !== undefined) throw new UsageError('give --key-file or --key, not both');
  if (flags.keyFile !== undefined) {
    if (flags.keyFile === '-' && !source.stdinAllowed) throw new UsageError(`stdin carries the protocol here: give --key-file PATH or ${source.envName}`);
    const text = flags.keyFile === '-' ? await readAll(source.stdin ?? process.stdin) : await readKeyFile(flags.keyFile);
    const key = text.trim();
    if (!key) throw new UsageError(`--key-file ${flags.keyFile === '-' ? '- (stdin)' : flags.keyFile} is empty`);
    return key;
  }
  if (flags.key !== undefined) {
    out.stderr.write(
      `agentdb: warning: a key given with --key is visible to other users (ps) and kept in shell history; use --key-file PATH, --key-file - (stdin) or ${source.envName}\n`,
    );
    return flags.key;
  }
  return source.envValue;
}

async function readKeyFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--key-file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
