import type { ApprovalRequest } from '../../src/approvals/approval.ts';

/**
 * An approval request as a parked write of `workspace/agent` makes it (an INSERT on the agent's
 * own database), for tests that fill the approval store directly: `callId` is `id` unless given.
 */
export function approvalRequest(r: {
  id: string;
  callId?: string;
  workspace: string;
  agent: string;
  createdAt: number;
  expiresAt: number;
  tool?: string;
}): ApprovalRequest {
  const callId = r.callId ?? r.id;
  return {
    id: r.id,
    callId,
    callKey: `${r.workspace}\n${r.agent}\n${callId}`,
    digest: 'd',
    shard: 0,
    workspace: r.workspace,
    agent: r.agent,
    tool: r.tool ?? 'DATA_WRITE_SQL',
    tier: 'write',
    database: `${r.workspace}/${r.agent}`,
    shared: false,
    sql: 'INSERT INTO t VALUES (1)',
    requester: r.agent,
    createdAt: r.createdAt,
    expiresAt: r.expiresAt,
  };
}
