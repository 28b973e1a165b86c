import type { FastifyPluginAsync } from 'fastify';
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

const firstIssue = (err: z.ZodError) => {
  const issue = err.issues[0];
  return issue ? `${issue.path.join('.') || 'input'}: ${issue.message}` : 'invalid input';
};

/**
 * `/v1/approvals`: a member lists their workspace's approvals and decides them, as themself.
 * Only parsing and formatting live here; who may decide what is the core's
 * ({@link ApprovalService.decide}), so HTTP, the CLI and the client library cannot disagree.
 */
export function approvalsRoutes(deps: ApprovalsRoutesDeps): FastifyPluginAsync {
  return async (app) => {
    app.addHook('onRequest', requireMember(deps.members));

    app.get('/v1/approvals', async (request, reply) => {
      const query = listQuery.safeParse(request.query ?? {});
      if (!query.success) return sendError(reply, 'INVALID_ARGUMENTS', firstIssue(query.error));
      const member = memberOf(request);
      const workspace = query.data.workspace ?? member.workspace;
      // A key is a member of one workspace; another's approvals (SQL, params) are not theirs to read.
      if (workspace !== member.workspace) {
        return sendError(reply, 'NOT_PERMITTED', `${member.name} is a member of ${member.workspace}, not of ${workspace}.`);
      }
      const approvals = await deps.approvals.list({ workspace, state: query.data.state, limit: query.data.limit });
      const refusals = await deps.approvals.standings(approvals);
      return reply.send({ approvals: approvals.map((a) => withRefusal(a, refusals)) });
    });

    app.post('/v1/approvals/:id/decision', async (request, reply) => {
      const params = idParams.safeParse(request.params);
      if (!params.success) return sendError(reply, 'INVALID_ARGUMENTS', firstIssue(params.error));
      const body = decisionBody.safeParse(request.body);
      if (!body.success) return sendError(reply, 'INVALID_ARGUMENTS', firstIssue(body.error));
      const { workspace, name, role } = memberOf(request);
      const result = await deps.approvals.decide(params.data.id, {
        decision: body.data.decision,
        reason: body.data.reason,
        by: { workspace, name, role },
        via: 'key',
      });
      if (!result.ok) return sendError(reply, result.code, result.detail);
      return reply.send({ approval: result.approval });
    });
  };
}
