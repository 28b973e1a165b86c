import { readFile, stat } from 'node:fs/promises';
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
    const text = flags.keyFile === '-' ? await readAll(source.stdin ?? process.stdin) : await readKeyFile(flags.keyFile, out);
    const key = text.trim();
    const named = flags.keyFile === '-' ? '- (stdin)' : flags.keyFile;
    if (!key) throw new UsageError(`--key-file ${named} is empty`);
    // What `members add > bob.key` leaves: the command's words around the key. Said plainly
    // here, not as UNAUTHENTICATED from the server, which named REDIS_URL as the likely cause.
    if (/\s/.test(key)) {
      throw new UsageError(
        `--key-file ${named} holds more than a key (${key.split(/\s+/).length} words): it must hold the key alone, as \`members add\` and \`keys mint\` write it with --save-key PATH`,
      );
    }
    return key;
  }
  if (flags.key !== undefined) {
    out.stderr.write(
      `agentdb: warning: a key given with --key is visible to other users (ps) and kept in shell history; use --key-file PATH, --key-file - (stdin) or ${source.envName}\n`,
    );
    return flags.key;
  }
  if (source.envValue !== undefined && /\s/.test(source.envValue.trim())) {
    throw new UsageError(`${source.envName} holds more than a key: it must be the key alone (--save-key PATH writes one to a file)`);
  }
  return source.envValue?.trim();
}

async function readKeyFile(file: string, out: Pick<Output, 'stderr'>): Promise<string> {
  try {
    // As ssh says of a private key: a file others may read is a key others may hold.
    if (process.platform !== 'win32' && ((await stat(file)).mode & 0o077) !== 0) {
      out.stderr.write(`agentdb: warning: --key-file ${file} can be read by other users; chmod 600 it\n`);
    }
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --key-file ${file}: ${unreadable(err)}`);
  }
}

/** Why a key file could not be read, in words, with the errno code kept for scripts. */
function unreadable(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const why: Record<string, string> = {
    ENOENT: 'no such file (`members add` and `keys mint` write one with --save-key PATH)',
    EACCES: 'permission denied',
    EISDIR: 'it is a folder, not a file',
  };
  if (code === undefined) return String(err);
  return `${why[code] ?? (err as Error).message} (${code})`;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
