import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { MemberRegistry } from '../registry/members.ts';
import { withRefusal, type ApprovalService } from '../approvals/approval-service.ts';
import { workspaceName } from '../contracts/names.ts';
import { memberOf, requireMember } from './auth.ts';
import { sendError } from './error-reply.ts';

/** What the approvals routes call: the members registry (auth) and the approval core. */
export interface ApprovalsRoutesDeps {
  members: MemberRegistry;
  approvals: ApprovalService;
}

// Strict objects: a misspelt field (`?status=`, `"decison"`) is an error, not silently ignored.
const listQuery = z.strictObject({
  state: z.enum(['pending', 'approved', 'rejected', 'expired', 'all']).default('pending'),
  workspace: workspaceName.optional(),
  // The audit grows without bound: pages of the newest, 200 unless asked.
  limit: z.coerce.number().int().min(1).max(10_000).default(200),
});

const decisionBody = z.strictObject({
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
      const approvals = await deps.approvals.list({ workspace, state: query.state, limit: query.limit });
      const refusals = await deps.approvals.standings(approvals);
      return reply.send({ approvals: approvals.map((a) => withRefusal(a, refusals)) });
    });

    app.post('/v1/approvals/:id/decision', { schema: { params: idParams, body: decisionBody } }, async (request, reply) => {
      const { workspace, name, role } = memberOf(request);
      const result = await deps.approvals.decide(request.params.id, {
        decision: request.body.decision,
        reason: request.body.reason,
        by: { workspace, name, role },
        via: 'key',
      });
      if (!result.ok) return sendError(reply, result.code, result.detail);
      return reply.send({ approval: result.approval });
    });
  };
}
