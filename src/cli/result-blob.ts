import fs, { createWriteStream } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { codeOf, errorBody, type AgentDbError, type ErrorCode } from '../errors.ts';
import { openBlobStore } from '../blobs/blob-stores.ts';
import { OffloadedResults } from '../blobs/offloaded-results.ts';
import { EXIT, UsageError, type CommandContext } from './context.ts';
import { exitFor } from './exit-status.ts';
import { callerFlag, nameFlag } from './name-flag.ts';

/**
 * `agentdb result-blob ID --workspace W [--agent A] [--out FILE]`: an offloaded query result
 * (`result.offloaded.id`), as JSON `{"columns":[…],"rows":[…]}`, streamed from the blob store
 * to stdout or FILE. With `--agent`, only that agent's own results are found (as its key would).
 */
export async function resultBlob(ctx: CommandContext, flags: { workspace: string; agent?: string; out?: string }, id: string): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const agent = flags.agent === undefined ? undefined : callerFlag(flags.agent);
  if (flags.out !== undefined) writableFile(flags.out);
  const store = openBlobStore(ctx.config);
  try {
    const results = new OffloadedResults(store, { dataDir: ctx.config.dataDir, ttlS: ctx.config.resultTtlS });
    let body: Readable;
    try {
      ({ body } = await results.open(id, agent === undefined ? { kind: 'member', workspace } : { kind: 'agent', workspace, agent }));
    } catch (err) {
      const code = codeOf(err);
      if (code !== 'NOT_FOUND' && code !== 'RESULT_EXPIRED') throw err;
      // As every command answers a refusal: `{"error":…}` on stdout (nothing of the result was
      // written there yet). This command reads the store itself, not through a worker: from
      // another folder (the default store is under ./data) or beside a Docker deployment it
      // looks in the wrong place, so the message says where it looked.
      const detail = (err as AgentDbError).detail ?? '';
      const where = code === 'NOT_FOUND' ? ` (looked in ${store.name})` : '';
      ctx.stdout.write(`${JSON.stringify({ error: errorBody(code, `${detail.replace(/\.$/, '')}${where}`, RESULT_BLOB_HINTS) })}\n`);
      return exitFor(code);
    }
    try {
      await pipeline(body, flags.out ? createWriteStream(flags.out) : ctx.stdout, { end: flags.out !== undefined });
    } catch (err) {
      // The folder checked above went away, or may not be written: the path's fault, said so.
      const code = (err as NodeJS.ErrnoException).code;
      if (flags.out && code && FILE_ERRORS.has(code)) throw new UsageError(`--out ${flags.out}: cannot write it (${code})`);
      throw err;
    }
    return EXIT.ok;
  } finally {
    await store.close();
  }
}

/** The registry's NOT_FOUND hint is about tables; here the usual cause is another blob store. */
const RESULT_BLOB_HINTS: Partial<Record<ErrorCode, string>> = {
  NOT_FOUND:
    "Check the id (`result.offloaded.id`) and the workspace and agent of the call that made it; run the command with the deployment's BLOB_STORE and BLOB_DIR (or its AGENTDB_DATA_DIR), or fetch it with GET /v1/results/:id.",
};

const FILE_ERRORS = new Set(['ENOENT', 'EISDIR', 'ENOTDIR', 'EACCES', 'EPERM', 'EROFS', 'ENOSPC']);

/** `--out`'s file: refused before anything is fetched when it is a folder or its folder does not exist. */
function writableFile(file: string): void {
  if (fs.statSync(file, { throwIfNoEntry: false })?.isDirectory())
    throw new UsageError(`--out ${file} is a folder; give a file name (--out ${path.join(file, 'result.json')})`);
  const dir = path.dirname(path.resolve(file));
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`--out ${file}: the folder ${dir} does not exist`);
}
