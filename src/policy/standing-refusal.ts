import type { CallJobData } from '../contracts/call.ts';
import type { AgentKeyRing } from '../registry/agent-keys.ts';
import { planCall } from './call-plan.ts';

/**
 * Why a call made with an agent key would not run if released now, judged against the registry
 * now: the key revoked, the agent or workspace removed, or the agent's registered settings (as
 * far as the key reaches) no longer letting it reach this database with this tool. A person
 * approves the statement, not a standing grant; the grant is the registry's, and it may have
 * narrowed while the call waited. Calls that carry their runtime's own settings (no key), and
 * members' calls, keep them: undefined.
 *
 * The worker asks when it releases an approved call (and refuses it); the inbox and
 * `approvals list` ask too, so a person sees before deciding that approving would change nothing.
 */
export async function standingRefusal(
  keyRing: AgentKeyRing,
  limits: { shardCount: number; maxCallBytes: number },
  data: CallJobData,
  database: string,
): Promise<string | undefined> {
  if (data.keyId === undefined || data.member) return undefined;
  const standing = await keyRing.standing(data.workspace, data.keyId, data.agent);
  if (!standing.ok) return `${standing.reason}.`;
  const planned = planCall(
    {
      callId: data.callId,
      workspace: data.workspace,
      agent: data.agent,
      settings: standing.settings,
      ...(data.introspect ? { introspect: true } : {}),
      tool: data.tool,
      arguments: data.arguments,
    },
    limits.shardCount,
    limits.maxCallBytes,
  );
  if (!planned.ok) return `agent "${data.agent}"'s registered settings changed: ${planned.failure.detail}`;
  if (planned.plan.databaseId !== database) {
    return `agent "${data.agent}"'s registered settings changed: the call would now reach ${planned.plan.databaseId}, not ${database}.`;
  }
  return undefined;
}
