import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { codeOf, type AgentDbError } from '../errors.ts';
import { openBlobStore } from '../history/blob-stores.ts';
import { OffloadedResults } from '../history/offloaded-results.ts';
import { EXIT, type CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';

/**
 * `agentdb result-blob ID --workspace W [--agent A] [--out FILE]`: an offloaded query result
 * (`result.offloaded.id`), as JSON `{"columns":[…],"rows":[…]}`, streamed from the blob store
 * to stdout or FILE. With `--agent`, only that agent's own results are found (as its key would).
 */
export async function resultBlob(ctx: CommandContext, flags: { workspace: string; agent?: string; out?: string }, id: string): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const agent = flags.agent === undefined ? undefined : flags.agent.startsWith('@') ? `@${nameFlag('--agent', flags.agent.slice(1))}` : nameFlag('--agent', flags.agent);
  const store = openBlobStore(ctx.config);
  try {
    const results = new OffloadedResults(store, { dataDir: ctx.config.dataDir, ttlS: ctx.config.resultTtlS });
    let body;
    try {
      ({ body } = await results.open(id, agent === undefined ? { kind: 'member', workspace } : { kind: 'agent', workspace, agent }));
    } catch (err) {
      const code = codeOf(err);
      if (code !== 'NOT_FOUND' && code !== 'RESULT_EXPIRED') throw err;
      ctx.stderr.write(`agentdb result-blob: ${code}: ${(err as AgentDbError).detail}\n`);
      // This command reads the store itself, not through a worker: from another folder (the
      // default store is under ./data) or beside a Docker deployment it looks in the wrong place.
      if (code === 'NOT_FOUND') ctx.stderr.write(`  (looked in ${store.name}: BLOB_STORE and BLOB_DIR, or AGENTDB_DATA_DIR, must be the deployment's; or GET /v1/results/:id)\n`);
      return EXIT.failed;
    }
    await pipeline(body, flags.out ? createWriteStream(flags.out) : ctx.stdout, { end: flags.out !== undefined });
    return EXIT.ok;
  } finally {
    await store.close();
  }
}
