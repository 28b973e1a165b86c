import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AgentDbError, codeOf } from '../errors.ts';
import { HISTORY_HINTS } from '../history/history-hints.ts';
import { ACTIVITY_PAGE } from '../history/activity-view.ts';
import type { MemberRegistry } from '../registry/members.ts';
import type { HistoryClient } from '../shards/history-client.ts';
import type { RestoreOnce } from '../shards/restore-once.ts';
import { checkHistoryAdmin } from '../policy/history-admin.ts';
import { memberOf, requireMember } from './auth.ts';
import { sendError, sendRefusal } from './error-reply.ts';
import { rateRefusalDetail, type RateRefusal } from '../calls/call-rate-limits.ts';
import { chargedActivityRead, chargedRestore, restoreRateLimited, type ChargeMemberLookup } from '../calls/activity-charge.ts';

/** What the history routes call: the members registry (auth) and the history client. */
export interface HistoryRoutesDeps {
  members: MemberRegistry;
  history: HistoryClient;
  /**
   * Counts a page of activity against the member's lookup rate (a tenth of a call: a page reads
   * history and the database's rows, and an admin could ask in a loop), and more for what it read
   * afresh, by `chargedActivityRead`; absent, not counted.
   */
  chargeLookup?: ChargeMemberLookup;
  /** Remembers restores sent with an `Idempotency-Key`, so a client's retry answers the first; absent, the header is ignored. */
  restoreOnce?: RestoreOnce;
}

/** An `Idempotency-Key` as the IETF draft has it: an opaque string, here up to 200 characters. */
const idempotencyKey = z.string().min(1).max(200);

const dbParams = z.object({ db: z.string().min(1).max(200) });

// No body (or JSON null) is an empty one: every field is optional.
const restoreBody = z.preprocess(
  (body) => body ?? {},
  z.strictObject({
    at: z.union([z.string().min(1).max(100), z.number()]).optional(),
    through: z.string().min(1).max(100).optional(),
    before: z.string().min(1).max(200).optional(),
    undo: z.string().min(1).max(100).optional(),
    into: z.string().min(1).max(200).optional(),
    dryRun: z.boolean().optional(),
  }),
);

// A page of the activity list: `limit` entries (ACTIVITY_PAGE) after the entry `before`.
const activityQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(ACTIVITY_PAGE.max).optional(),
  before: z.string().min(1).max(200).optional(),
});

// `attachValidation`: the schemas' verdict is left on the request for the handler, not answered
// by Fastify before it. A body is judged only after the key was found to be an admin of the
// database's workspace, so another workspace's key hears NOT_FOUND whatever it sent, and the
// history commands' hints go with INVALID_ARGUMENTS.
const historyRoute = { schema: { params: dbParams }, attachValidation: true };
const activityRoute = { schema: { params: dbParams, querystring: activityQuery }, attachValidation: true };
const restoreRoute = { schema: { params: dbParams, body: restoreBody }, attachValidation: true };

/**
 * `GET /v1/databases/:db/history`, `GET /v1/databases/:db/activity` (a page of the history as
 * the calls that made it, newest first) and `POST /v1/databases/:db/restore` (`:db` URL-encoded:
 * `acme` or `acme%2Fscout`), for admins of the database's workspace, with their member key. A
 * key of another workspace hears NOT_FOUND, as for a database that does not exist: nothing
 * tells it which databases exist elsewhere. The rules of a restore are the core's.
 */
export function historyRoutes(deps: HistoryRoutesDeps): FastifyPluginAsyncZod {
  return async (app) => {
    app.addHook('onRequest', requireMember(deps.members));

    /**
     * The database id of the request, once the history rule (policy/history-admin.ts) lets its
     * member ask; else sends the refusal. Checked here before the body, so another workspace's
     * key hears NOT_FOUND whatever it sent; the history client checks it again for every adapter.
     */
    const allowed = (request: FastifyRequest & { params: { db: string } }, reply: FastifyReply): string | undefined => {
      if (request.validationError?.validationContext === 'params') return void invalid(reply, request.validationError);
      const { db } = request.params;
      try {
        checkHistoryAdmin({ member: memberOf(request) }, db);
      } catch (err) {
        return void refused(reply, err);
      }
      return db;
    };

    app.get('/v1/databases/:db/history', historyRoute, async (request, reply) => {
      const db = allowed(request, reply);
      if (db === undefined) return reply;
      try {
        // Its last commits are read from the activity list: charged as a page of it is.
        const member = memberOf(request);
        const out = await chargedActivityRead(deps.chargeLookup, member, (onRead) => deps.history.history(db, { member }, { onRead }));
        return 'limited' in out ? rateLimited(reply, out.limited) : reply.send(out.page);
      } catch (err) {
        return refused(reply, err);
      }
    });

    app.get('/v1/databases/:db/activity', activityRoute, async (request, reply) => {
      const db = allowed(request, reply);
      if (db === undefined) return reply;
      if (request.validationError) return invalid(reply, request.validationError);
      try {
        const member = memberOf(request);
        const out = await chargedActivityRead(deps.chargeLookup, member, (onRead) => deps.history.activity(db, request.query, { member }, onRead));
        return 'limited' in out ? rateLimited(reply, out.limited) : reply.send(out.page);
      } catch (err) {
        return refused(reply, err);
      }
    });

    app.post('/v1/databases/:db/restore', restoreRoute, async (request, reply) => {
      const db = allowed(request, reply);
      if (db === undefined) return reply;
      if (request.validationError) return invalid(reply, request.validationError);
      const member = memberOf(request);
      const { workspace, name } = member;
      const req = { ...request.body, by: { who: `${workspace}/@${name}`, via: 'key' as const } };
      const restore = async () => {
        const out = await chargedRestore(deps.chargeLookup, member, req.dryRun === true, (onRead, paidBytes) =>
          deps.history.restore(db, { ...req, paidBytes }, { member }, onRead),
        );
        // Thrown, so a restore sent again with the same key after the wait runs (nothing is remembered of a refusal).
        if ('limited' in out) throw restoreRateLimited(out.limited, req.dryRun === true);
        return out.page;
      };
      // Registry errors (HISTORY_OUT_OF_RANGE, RESTORE_RUNNING …) reach the app's error handler, which answers their code.
      try {
        const sentKey = idempotencyKey.safeParse(request.headers['idempotency-key']);
        if (!sentKey.success || req.dryRun === true || !deps.restoreOnce) return reply.send(await restore());
        // A client that lost the answer (a timeout, a dropped connection) and sends the restore
        // again with its key gets the first one's answer: one restore, one undo point. The key
        // counts with the member, the database and the body: the same key on another request is another restore.
        const submission = `v1\n${workspace}/@${name}\n${db}\n${JSON.stringify(request.body ?? {})}`;
        const answer = await deps.restoreOnce.run(
          workspace,
          sentKey.data,
          submission,
          async () => JSON.stringify(await restore()),
          () => STILL_RUNNING,
        );
        if (answer === STILL_RUNNING)
          throw new AgentDbError('RESTORE_RUNNING', 'A restore sent with this Idempotency-Key is still running; ask again with the same key for its answer.');
        return reply.type('application/json').send(answer);
      } catch (err) {
        if (codeOf(err) === 'RATE_LIMITED') return sendRefusal(reply, err as AgentDbError);
        return refused(reply, err);
      }
    });
  };
}

/** A failed schema (worded by route-validation.ts), answered with the history commands' hints. */
function invalid(reply: FastifyReply, err: Error): FastifyReply {
  if (!(err instanceof AgentDbError)) throw err;
  return sendError(reply, err.code, err.detail, undefined, HISTORY_HINTS);
}

/**
 * The history client's refusals with the history commands' hints: NOT_FOUND and
 * INVALID_ARGUMENTS here are about database ids and times, not an agent's tables. The rest
 * (HISTORY_OUT_OF_RANGE, RESTORE_RUNNING, QUOTA_EXCEEDED by the disk quota: 403 …) reach the
 * app's error handler, which answers the status `httpStatusOf` gives.
 */
function refused(reply: FastifyReply, err: unknown): FastifyReply {
  const code = codeOf(err);
  if (code && HISTORY_HINTS[code]) return sendError(reply, code, (err as { detail?: string }).detail, undefined, HISTORY_HINTS);
  throw err;
}

/** What a restore sent again with its key answers while the first still runs past the wait. */
const STILL_RUNNING = '"running"';

/** RATE_LIMITED (429) with Retry-After and `error.retryAfter`, naming the budget spent. */
function rateLimited(reply: FastifyReply, r: RateRefusal): FastifyReply {
  return sendRefusal(reply, limitedError(r));
}

function limitedError(r: RateRefusal): AgentDbError {
  const whose = r.of === 'workspace' ? 'The workspace' : 'This member';
  const detail = rateRefusalDetail(
    r,
    whose,
    'a page of activity counts a tenth of one, as a lookup does, and a call more per 10,000 commits and rows it read afresh',
  );
  return new AgentDbError('RATE_LIMITED', detail, { retryAfter: r.retryAfterS });
}
