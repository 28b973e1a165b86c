/**
 * agentdb's tools for the OpenAI Agents SDK (`@openai/agents` 0.20): `import { agentDbTools } from 'agentdb/openai-agents'`.
 * A write that agentdb parks for a person is a tool with `needsApproval`: the run stops with an
 * interruption, resolved by the app through {@link OpenAiAgentsAgentDb.approve} and
 * {@link OpenAiAgentsAgentDb.reject} (which record the decision in agentdb and then call the
 * run state's own `approve`/`reject`), or by a person in agentdb ({@link OpenAiAgentsAgentDb.awaitDecisions}).
 * @packageDocumentation
 */
import type * as Agents from '@openai/agents';
import type { FunctionTool, RunToolApprovalItem } from '@openai/agents';
import type { AgentDbClient } from '../calls/client.ts';
import { AgentToolset, type FrameworkTool, type ToolAnswer } from './agent-toolset.ts';
import type { AgentToolsOptions } from './toolset-options.ts';
import { loadFramework } from './framework-package.ts';

export type { AgentToolsOptions, Approver, ApprovalAsk, DecisionProof } from './toolset-options.ts';

const agents = await loadFramework<typeof Agents>({
  adapter: 'agentdb/openai-agents',
  name: '@openai/agents',
  module: '@openai/agents',
  majors: [0],
  minors: [20],
});

/** Options of {@link agentDbTools}. */
export interface OpenAiAgentsToolsOptions extends AgentToolsOptions {
  /**
   * Strict mode (default true): the tools' schemas as strict function calling takes them (every
   * property required, optional ones nullable, null meaning left out). Non-strict, the SDK sends
   * the schemas with `additionalProperties: true`, which agentdb then refuses by its contracts.
   */
  strict?: boolean;
}

/** What the adapter uses of a run's `RunState` (of any agent and context type). */
export interface ApprovalState {
  /** Approves the tool call (`alwaysApprove`: its later calls too). */
  approve(item: RunToolApprovalItem, options?: { alwaysApprove?: boolean }): void;
  /** Rejects the tool call (`alwaysReject`: its later calls too), with a message for the model. */
  reject(item: RunToolApprovalItem, options?: { alwaysReject?: boolean; message?: string }): void;
}

/** A run's result, as `run()` answers it: its interruptions and its state. */
export interface Interrupted {
  /** The tool calls waiting for approval. */
  interruptions: RunToolApprovalItem[];
  /** The run's state, to approve or reject them on and run again from. */
  state: ApprovalState;
}

/** What {@link agentDbTools} gives an app. */
export interface OpenAiAgentsAgentDb {
  /** The agent's tools: pass as an `Agent`'s `tools`. */
  tools: FunctionTool[];
  /**
   * True for an interruption one of these tools raised (a call agentdb parked); the app's own
   * tools' interruptions are its own to resolve.
   */
  owns(item: RunToolApprovalItem): boolean;
  /** Records the app's approval in agentdb as the approver's decision, then approves it in the run state. */
  approve(state: ApprovalState, item: RunToolApprovalItem, reason?: string): Promise<void>;
  /**
   * Records the app's rejection in agentdb as the approver's decision, then rejects it in the
   * run state, with agentdb's answer (APPROVAL_REJECTED, its reason and hint) as what the model reads.
   */
  reject(state: ApprovalState, item: RunToolApprovalItem, reason?: string): Promise<void>;
  /**
   * Waits for agentdb's decision (web page, CLI, HTTP) on each of the run's interruptions these
   * tools raised and applies it to the run state; resume with `run(agent, result.state)`.
   */
  awaitDecisions(result: Interrupted): Promise<void>;
}

/**
 * The registered agent's tools (DATA_* or db_*) as OpenAI Agents SDK function tools over `client`.
 * @throws AgentDbError NOT_FOUND, NOT_PERMITTED or DATABASE_OFF when the registration does not give what is asked (see {@link AgentToolset.open}).
 */
export async function agentDbTools(client: AgentDbClient, opts: OpenAiAgentsToolsOptions): Promise<OpenAiAgentsAgentDb> {
  const toolset = await AgentToolset.open(client, opts);
  const strict = opts.strict ?? true;
  // A write's answer when it was not parked: the approval check ran it already.
  const ran = new Map<string, ToolAnswer>();
  const make = (t: FrameworkTool): FunctionTool => {
    const write = t.tier !== 'read';
    return agents.tool({
      name: t.name,
      description: t.description,
      parameters: (strict ? t.strictInputSchema : t.inputSchema) as never,
      strict: strict as never,
      needsApproval: write
        ? async (_ctx: unknown, input: unknown, callId?: string) => {
            const started = await toolset.start(t.name, input, callId ?? '');
            if (started.parked) return true;
            ran.set(toolset.callIdFor(t.name, input, callId ?? ''), started.answer);
            return false;
          }
        : false,
      execute: async (input: unknown, _ctx?: unknown, details?: { toolCall?: { callId: string } }) => {
        const callId = details?.toolCall?.callId ?? '';
        const key = toolset.callIdFor(t.name, input, callId);
        const answer = ran.get(key);
        if (answer) {
          ran.delete(key);
          return answer.text;
        }
        if (!write) {
          const started = await toolset.start(t.name, input, callId);
          return (started.parked ? await toolset.finish(t.name, input, callId) : started.answer).text;
        }
        // Executed while parked: the run state's approval said yes.
        return (await toolset.finish(t.name, input, callId, { approved: true })).text;
      },
    } as never) as FunctionTool;
  };
  const tools = toolset.tools.map(make);
  const callOf = (item: RunToolApprovalItem) => {
    const raw = item.rawItem as { type: string; callId?: string; name?: string; arguments?: string };
    if (raw.type !== 'function_call' || !raw.name || !toolset.tierOf(raw.name)) return undefined;
    let input: unknown;
    try {
      input = JSON.parse(raw.arguments ?? '{}');
    } catch {
      return undefined;
    }
    return { name: raw.name, input, callId: raw.callId ?? '' };
  };
  return {
    tools,
    owns: (item) => callOf(item) !== undefined,
    async approve(state, item, reason) {
      const call = callOf(item);
      if (call) await toolset.finish(call.name, call.input, call.callId, { approved: true, ...(reason ? { reason } : {}) });
      state.approve(item);
    },
    async reject(state, item, reason) {
      const call = callOf(item);
      if (!call) return state.reject(item);
      const answer = await toolset.finish(call.name, call.input, call.callId, { approved: false, ...(reason ? { reason } : {}) });
      state.reject(item, { message: answer.text });
    },
    async awaitDecisions(result) {
      for (const item of result.interruptions) {
        const call = callOf(item);
        if (!call) continue;
        const d = await toolset.decisionOf(call.name, call.input, call.callId);
        if (d.approved) result.state.approve(item);
        else result.state.reject(item, { message: d.answer.text });
      }
    },
  };
}
