import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { z } from 'zod';
import { HISTORY_HINTS, codeOf } from '../errors.ts';
import type { MemberRegistry } from '../registry/members.ts';
import type { HistoryClient } from '../shards/history-client.ts';
import { memberOf, requireMember } from './auth.ts';
import { sendError } from './error-reply.ts';

/** What the history routes call: the members registry (auth) and the history client. */
export interface HistoryRoutesDeps {
  members: MemberRegistry;
  history: HistoryClient;
}

const dbParams = z.object({ db: z.string().min(1).max(200) });

const restoreBody = z.strictObject({
  at: z.union([z.string().min(1).max(100), z.number()]).optional(),
  undo: z.string().min(1).max(100).optional(),
  into: z.string().min(1).max(200).optional(),
  dryRun: z.boolean().optional(),
});

const firstIssue = (err: z.ZodError) => {
  const issue = err.issues[0];
  return issue ? `${issue.path.join('.') || 'input'}: ${issue.message}` : 'invalid input';
};

/**
 * `GET /v1/databases/:db/history` and `POST /v1/databases/:db/restore` (`:db` URL-encoded:
 * `acme` or `acme%2Fscout`), for admins of the database's workspace, with their member key. A
 * key of another workspace hears NOT_FOUND, as for a database that does not exist: nothing
 * tells it which databases exist elsewhere. The rules of a restore are the core's.
 */
export function historyRoutes(deps: HistoryRoutesDeps): FastifyPluginAsync {
  return async (app) => {
    app.addHook('onRequest', requireMember(deps.members));

    /** The database id of the request; else sends the refusal. Who may ask is the history client's rule. */
    const dbOf = (request: Parameters<typeof memberOf>[0], reply: Parameters<typeof sendError>[0]): string | undefined => {
      const params = dbParams.safeParse(request.params);
      if (!params.success) return void sendError(reply, 'INVALID_ARGUMENTS', firstIssue(params.error), undefined, HISTORY_HINTS);
      return params.data.db;
    };

    app.get('/v1/databases/:db/history', async (request, reply) => {
      const db = dbOf(request, reply);
      if (db === undefined) return reply;
      try {
        return reply.send(await deps.history.history(db, { member: memberOf(request) }));
      } catch (err) {
        return refused(reply, err);
      }
    });

    app.post('/v1/databases/:db/restore', async (request, reply) => {
      const db = dbOf(request, reply);
      if (db === undefined) return reply;
      const body = restoreBody.safeParse(request.body ?? {});
      if (!body.success) return sendError(reply, 'INVALID_ARGUMENTS', firstIssue(body.error), undefined, HISTORY_HINTS);
      const member = memberOf(request);
      const { workspace, name } = member;
      // Registry errors (HISTORY_OUT_OF_RANGE, RESTORE_RUNNING …) reach the app's error handler, which answers their code.
      try {
        return reply.send(await deps.history.restore(db, { ...body.data, by: { who: `${workspace}/@${name}`, via: 'key' } }, { member }));
      } catch (err) {
        return refused(reply, err);
      }
    });
  };
}

/**
 * The history client's refusals with the history commands' hints: NOT_FOUND and
 * INVALID_ARGUMENTS here are about database ids and times, not an agent's tables. The rest
 * (HISTORY_OUT_OF_RANGE, RESTORE_RUNNING …) reach the app's error handler as before.
 */
function refused(reply: FastifyReply, err: unknown): FastifyReply {
  const code = codeOf(err);
  if (code && HISTORY_HINTS[code]) return sendError(reply, code, (err as { detail?: string }).detail, undefined, HISTORY_HINTS);
  throw err;
}
