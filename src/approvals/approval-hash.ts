import type { Approval, ApprovalRequest, ApprovalState, DecisionChannel } from './approval.ts';

/**
 * An approval read back from its Redis hash: the request as asked (`request`, JSON) and the
 * fields its transitions set beside it. Undefined for a hash that is gone or holds no request.
 */
export function parseApproval(hash: Record<string, string> | null | undefined): Approval | undefined {
  if (!hash?.request) return undefined;
  const request = JSON.parse(hash.request) as ApprovalRequest;
  return {
    ...request,
    state: hash.state as ApprovalState,
    ...(hash.decidedBy ? { decidedBy: hash.decidedBy } : {}),
    ...(hash.decidedAt ? { decidedAt: Number(hash.decidedAt) } : {}),
    ...(hash.decidedVia ? { decidedVia: hash.decidedVia as DecisionChannel } : {}),
    ...(hash.reason ? { reason: hash.reason } : {}),
    ...(hash.supersededBy ? { supersededBy: hash.supersededBy } : {}),
    ...(hash.ran ? { ran: JSON.parse(hash.ran) as Approval['ran'] } : {}),
  };
}
