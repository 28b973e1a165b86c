import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { MemberRegistry } from '../registry/members.ts';
import { MAX_BULK_DECISIONS, type ApprovalService } from '../approvals/approval-service.ts';
import { withRefusal } from '../approvals/approval-standings.ts';
import { decodeCursor, encodeCursor, MAX_LIST_PAGE } from '../approvals/approval-listing.ts';
import { APPROVAL_STATES } from '../approvals/approval.ts';
import { chargedApprovalPage, chargedApprovalRead, type ChargeMemberLookup } from '../calls/activity-charge.ts';
import { rateRefusalDetail, type RateRefusal } from '../calls/call-rate-limits.ts';
import { agentName, workspaceName } from '../contracts/names.ts';
import { AgentDbError } from '../errors.ts';
import { memberOf, requireMember } from './auth.ts';
import { sendError, sendRefusal } from './error-reply.ts';

/** What the approvals routes call: the members registry (auth) and the approval core. */
export interface ApprovalsRoutesDeps {
  members: MemberRegistry;
  approvals: ApprovalService;
  /** Where a list page is charged (`KeyedCalls.chargeMemberLookup`); absent: not counted. */
  chargeLookup?: ChargeMemberLookup;
}

// Strict objects: a misspelt field (`?status=`, `"decison"`) is an error, not silently ignored.
const listQuery = z.strictObject({
  state: z.enum([...APPROVAL_STATES, 'all']).default('pending'),
  workspace: workspaceName.optional(),
  // The audit grows without bound: pages of the newest, at most MAX_LIST_PAGE, and a cursor to
  // the next (issue 27: limit=10000 answered 40 MB).
  limit: z.coerce.number().int().min(1).max(MAX_LIST_PAGE).default(MAX_LIST_PAGE),
  cursor: z
    .string()
    .max(400)
    .refine((c) => decodeCursor(c) !== undefined, 'not a cursor this service made: pass the nextCursor of the page before, as it is')
    .optional(),
  // Filters: exact names, as the approvals carry them (`<workspace>/<agent>` for an agent's database).
  agent: agentName.optional(),
  database: z.string().min(1).max(200).optional(),
  tool: z.string().min(1).max(64).optional(),
});

const decisionBody = z.strictObject({
  decision: z.enum(['approve', 'reject']),
  reason: z.string().optional(),
});

// The cap is the core's too (`decideMany`); said here, a longer list is refused before any id is read.
const bulkBody = z.strictObject({
  ids: z.array(z.string().min(1).max(200)).min(1).max(MAX_BULK_DECISIONS, `at most ${MAX_BULK_DECISIONS} ids per request: send them in smaller batches`),
  decision: z.enum(['approve', 'reject']),
  reason: z.string().optional(),
});

// Ids are minted by the core; the bound only keeps absurd ones from reaching Redis.
const idParams = z.object({ id: z.string().min(1).max(200) });

/**
 * `/v1/approvals`: a member lists their workspace's approvals and decides them, as themself.
 * Only parsing and formatting live here; who may decide what is the core's
 * ({@link ApprovalService.decide}), so HTTP, the CLI and the client library cannot disagree.
 */
export function approvalsRoutes(deps: ApprovalsRoutesDeps): FastifyPluginAsyncZod {
  return async (app) => {
    app.addHook('onRequest', requireMember(deps.members));

    app.get('/v1/approvals', { schema: { querystring: listQuery } }, async (request, reply) => {
      const query = request.query;
      const member = memberOf(request);
      const workspace = query.workspace ?? member.workspace;
      // A key is a member of one workspace; another's approvals (SQL, params) are not theirs to read.
      if (workspace !== member.workspace) {
        return sendError(reply, 'NOT_PERMITTED', `${member.name} is a member of ${member.workspace}, not of ${workspace}.`);
      }
      const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
      const filter = {
        ...(query.agent ? { agent: query.agent } : {}),
        ...(query.database ? { database: query.database } : {}),
        ...(query.tool ? { tool: query.tool } : {}),
      };
      // A page walks up to 5,000 entries of the index to fill itself (a filter naming nothing there
      // walks them all): charged as an inbox page is, a lookup and a call per 1,000 looked at.
      const out = await chargedApprovalPage(deps.chargeLookup, member, (onRead) =>
        deps.approvals.scan({ workspace, state: query.state, limit: query.limit, filter, onRead, ...(cursor ? { cursor } : {}) }),
      );
      if ('limited' in out)
        return rateLimited(reply, out.limited, 'a page of approvals counts a tenth of one, and a call more per 1,000 approvals it looked at');
      const page = out.page;
      return reply.send({ approvals: page.approvals, ...(page.next ? { nextCursor: encodeCursor(page.next) } : {}) });
    });

    // One approval whole: a list cuts SQL and params (`cut: true`).
    app.get('/v1/approvals/:id', { schema: { params: idParams } }, async (request, reply) => {
      const member = memberOf(request);
      const read = await chargedApprovalRead(deps.chargeLookup, member, () => deps.approvals.get(request.params.id));
      if ('limited' in read) return rateLimited(reply, read.limited, 'a read of an approval counts a tenth of one');
      const approval = read.page;
      // Another workspace's approval answers as an unknown one: ids are not probed.
      if (!approval || approval.workspace !== member.workspace) {
        return sendError(reply, 'NOT_FOUND', `no approval ${JSON.stringify(request.params.id)} in workspace ${member.workspace}`);
      }
      const refusals = await deps.approvals.standings([approval]);
      return reply.send({ approval: withRefusal(approval, refusals) });
    });

    app.post('/v1/approvals/:id/decision', { schema: { params: idParams, body: decisionBody } }, async (request, reply) => {
      const { workspace, name, role, createdAt } = memberOf(request);
      const result = await deps.approvals.decide(request.params.id, {
        decision: request.body.decision,
        reason: request.body.reason,
        by: { workspace, name, role, createdAt },
        via: 'key',
      });
      if (!result.ok) return sendError(reply, result.code, result.detail);
      return reply.send({ approval: result.approval });
    });

    // Several at once, one reason: 200 with each id's outcome (`ok`, and `approval` or `code` and
    // `detail`), in the order sent; one decided by someone else first does not stop the rest.
    app.post('/v1/approvals/decide', { schema: { body: bulkBody } }, async (request, reply) => {
      const { workspace, name, role, createdAt } = memberOf(request);
      const { ids, decision, reason } = request.body;
      const result = await deps.approvals.decideMany(ids, { decision, reason, by: { workspace, name, role, createdAt }, via: 'key' });
      if (!result.ok) return sendError(reply, result.code, result.detail);
      return reply.send({ results: result.results });
    });
  };
}

/** RATE_LIMITED (429) with Retry-After and `error.retryAfter`, naming the budget spent and what the request counted (`what`). */
function rateLimited(reply: FastifyReply, r: RateRefusal, what: string): FastifyReply {
  const whose = r.of === 'workspace' ? 'The workspace' : 'This member';
  return sendRefusal(reply, new AgentDbError('RATE_LIMITED', rateRefusalDetail(r, whose, what), { retryAfter: r.retryAfterS }));
}
