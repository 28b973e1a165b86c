// What every framework adapter is given (agentdb/ai-sdk, agentdb/openai-agents, agentdb/langchain):
// the agent it acts as, and who a decision made in the framework's own UI is recorded as.
import type { AwaitingAnswer } from '../calls/client.ts';
import type { Surface } from '../contracts/agent-profile.ts';

/** Proof of who decides an approval: a member's key, or this trusted runtime naming the member. */
export type DecisionProof =
  | {
      /** The deciding member's key. */
      key: string;
    }
  | {
      /** The member this trusted runtime decides for (the person signed in to the app). */
      by: string;
      /** Marks a decision made by the runtime as operator, not with a member's key. */
      operator: true;
    };

/** What a decider callback is told: the parked call and agentdb's approval of it. */
export interface ApprovalAsk {
  /** The parked call's id. */
  callId: string;
  /** The tool the model called. */
  tool: string;
  /** agentdb's approval of it: its id, tier, expiry and the write's effect when known. */
  approval: AwaitingAnswer['approval'];
  /** What the person decided in the framework's UI. */
  decision: 'approve' | 'reject';
}

/**
 * Who a decision made in the framework's own UI is recorded as in agentdb: a member key, or a
 * callback answering the proof for each decision (the person signed in to the app).
 */
export type Approver = DecisionProof | ((ask: ApprovalAsk) => DecisionProof | Promise<DecisionProof>);

/** Options every adapter takes. */
export interface AgentToolsOptions {
  /** The workspace the agent is registered in. */
  workspace: string;
  /** The registered agent (`agentdb agents set`) whose surface and settings the tools carry. */
  agent: string;
  /** The surface expected, `data` (DATA_* tools) or `db` (db_*); refused at once when the registration says otherwise. */
  surface?: Surface['kind'];
  /**
   * Binds every call to one scope, `agent` (its own tables) or `workspace` (the shared ones),
   * and leaves `scope` and `agent` out of the schemas; refused at once when the registration
   * does not reach it. Without it the model picks per call, as the DATA_* contract lets it.
   */
  scope?: 'agent' | 'workspace';
  /** Required to decide in the framework's UI; without it only agentdb (web, CLI, HTTP) decides. */
  approver?: Approver;
  /** How long a worker may take to pick a call up (default 30 s). */
  timeoutMs?: number;
}
