import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AgentDbError, codeOf } from '../errors.ts';
import type { OffloadedResults } from '../blobs/offloaded-results.ts';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import type { KeyAuthenticator } from '../registry/principal.ts';
import { sendError, sendRefusal } from './error-reply.ts';
import { principalOf, requireKey } from './key-auth.ts';

/** What the results route needs: key resolution and the offloaded results. */
export interface ResultsRoutesDeps {
  auth: KeyAuthenticator;
  results: OffloadedResults;
  /** Where a download is charged against the key's and workspace's rates (`KeyedCalls.chargeDownload`). */
  calls: Pick<KeyedCalls, 'chargeDownload'>;
}

const ID_LENGTH = 'the result id is 1 to 128 characters';
const idParams = z.object({ id: z.string().min(1, ID_LENGTH).max(128, ID_LENGTH) });

/**
 * `GET /v1/results/:id`: a query result too large for its envelope (`result.offloaded.id`), as
 * JSON `{"columns":[…],"rows":[…]}`, streamed from the blob store. Any member key of the
 * result's workspace reads it, and so does the key of the agent whose call it was; any other
 * key answers NOT_FOUND, as an unknown id does. Past its expiry: RESULT_EXPIRED (410). Each
 * download is charged a lookup and a call per MiB; past the rate 429 RATE_LIMITED.
 */
export function resultsRoutes(deps: ResultsRoutesDeps): FastifyPluginAsyncZod {
  return async (app) => {
    app.addHook('onRequest', requireKey(deps.auth));
    app.get('/v1/results/:id', { schema: { params: idParams } }, async (request, reply) => {
      const p = principalOf(request);
      const reader =
        p.kind === 'member'
          ? { kind: 'member' as const, workspace: p.workspace, member: p.member.name }
          : { kind: 'agent' as const, workspace: p.workspace, agent: p.agent };
      try {
        const { ref, body } = await deps.results.open(request.params.id, reader, (bytes) => deps.calls.chargeDownload(p, bytes));
        return reply
          .header('content-type', 'application/json; charset=utf-8')
          .header('content-length', String(ref.bytes))
          .header('x-agentdb-rows', String(ref.rows))
          .header('x-agentdb-expires-at', ref.expiresAt)
          .send(body);
      } catch (err) {
        // RATE_LIMITED (too many downloads under way, or the rate spent) goes with its Retry-After.
        if (err instanceof AgentDbError && err.code !== 'INTERNAL') return sendRefusal(reply, err);
        const code = codeOf(err);
        if (code && code !== 'INTERNAL') return sendError(reply, code, (err as { detail?: string }).detail);
        throw err;
      }
    });
  };
}
