/**
 * agentdb's tools for the Vercel AI SDK (`ai` 7, the current major): `import { agentDbTools } from 'agentdb/ai-sdk'`.
 * A write that agentdb parks for a person goes through the SDK's own tool approval: its tool
 * call ends the run with a `tool-approval-request`, which the app's approval UI shows.
 * @packageDocumentation
 */
import type * as Ai from 'ai';
import type { ModelMessage, Tool, ToolApprovalResponse, ToolModelMessage, ToolSet } from 'ai';
import type { AgentDbClient } from '../calls/client.ts';
import { AgentToolset, type FrameworkTool, isRefusal, type ToolAnswer } from './agent-toolset.ts';
import type { AgentToolsOptions } from './toolset-options.ts';
import { loadFramework } from './framework-package.ts';

export type { AgentToolsOptions, Approver, ApprovalAsk, DecisionProof } from './toolset-options.ts';
export type { ToolAnswer } from './agent-toolset.ts';

const ai = await loadFramework<typeof Ai>({ adapter: 'agentdb/ai-sdk', name: 'ai', module: 'ai', majors: [7] });

/** Options of {@link agentDbTools}. */
export interface AiSdkToolsOptions extends AgentToolsOptions {
  /** Declare the tools in strict mode, with strict-mode schemas (for providers that support it, OpenAI's). */
  strict?: boolean;
}

/** What {@link agentDbTools} gives an app. */
export interface AiSdkAgentDb {
  /** The agent's tools, by name: pass as `tools` to `generateText`, `streamText` or an `Agent`. */
  tools: ToolSet;
  /**
   * The same approval rule per tool, for an app that configures approval on `generateText`
   * (`toolApproval: { ...db.toolApproval, ...its own }`): a write agentdb parked asks for
   * `user-approval`, its reason the agent's rationale and agentdb's approval id ({@link reasonOf}'s).
   */
  toolApproval: Record<string, (input: unknown, options: { toolCallId: string }) => Promise<{ type: 'user-approval'; reason: string } | undefined>>;
  /**
   * Records in agentdb the decisions of the app's own approval UI found in `messages` (the
   * `tool-approval-response` parts of its last tool message), each as the approver's; call it
   * before resuming the run with them. An approval is recorded by the tool's execution too, but
   * a denial runs nothing in the SDK: only this tells agentdb. The first decision wins: a denial
   * of a call agentdb had approved already is turned into an approval in `messages` (changed in
   * place), so the SDK runs the tool and the model reads what agentdb ran.
   */
  recordDecisions(messages: ModelMessage[]): Promise<void>;
  /**
   * What to show the person asked by a `tool-approval-request` of these tools (a part of
   * `generateText`'s `content`): the agent's rationale and agentdb's approval id, as the request's
   * own `reason` carries them when approval is configured with {@link toolApproval}. The SDK
   * gives a request made by a tool's `needsApproval` (the tools' own rule) no reason at all.
   * Undefined for another tool's request, or a call no longer waiting for a person.
   */
  reasonOf(request: { toolCall: { toolCallId: string; toolName: string; input: unknown } }): Promise<string | undefined>;
  /**
   * Waits for agentdb's decisions (web page, CLI, HTTP) on the approvals the run asked for and
   * answers the tool message of `tool-approval-response` parts to append before resuming it;
   * undefined when `messages` ask for none of agentdb's.
   */
  awaitDecisions(messages: ModelMessage[]): Promise<ToolModelMessage | undefined>;
}

/**
 * The registered agent's tools (DATA_* or db_*) as AI SDK tools over `client`.
 * @throws AgentDbError NOT_FOUND, NOT_PERMITTED or DATABASE_OFF when the registration does not give what is asked (see {@link AgentToolset.open}).
 */
export async function agentDbTools(client: AgentDbClient, opts: AiSdkToolsOptions): Promise<AiSdkAgentDb> {
  const toolset = await AgentToolset.open(client, opts);
  // A write's answer when it was not parked: the approval check ran it already.
  const ran = new Map<string, ToolAnswer>();
  const approvalOf =
    (t: FrameworkTool) =>
    async (input: unknown, { toolCallId }: { toolCallId: string }) => {
      const started = await toolset.start(t.name, input, toolCallId);
      if (started.parked) return { type: 'user-approval' as const, reason: approvalReason(input, started) };
      ran.set(toolset.callIdFor(t.name, input, toolCallId), started.answer);
      return undefined;
    };
  const tools: Record<string, Tool> = {};
  const toolApproval: AiSdkAgentDb['toolApproval'] = {};
  for (const t of toolset.tools) {
    const write = t.tier !== 'read';
    if (write) toolApproval[t.name] = approvalOf(t);
    tools[t.name] = ai.tool({
      description: t.description,
      inputSchema: ai.jsonSchema<unknown>(opts.strict ? t.strictInputSchema : t.inputSchema),
      ...(opts.strict ? { strict: true } : {}),
      ...(write ? { needsApproval: async (input: unknown, o: { toolCallId: string }) => (await approvalOf(t)(input, o)) !== undefined } : {}),
      execute: async (input: unknown, { toolCallId }: { toolCallId: string }) => {
        const key = toolset.callIdFor(t.name, input, toolCallId);
        const answer = ran.get(key);
        if (answer) {
          ran.delete(key);
          return answer;
        }
        if (!write) {
          const started = await toolset.start(t.name, input, toolCallId);
          return started.parked ? toolset.finish(t.name, input, toolCallId) : started.answer;
        }
        // Executed while parked: the SDK's approval said yes.
        return toolset.finish(t.name, input, toolCallId, { approved: true });
      },
      toModelOutput: ({ output }: { output: ToolAnswer }) => ({ type: output.isError ? 'error-text' : 'text', value: output.text }),
    } as Tool);
  }
  return {
    tools,
    toolApproval,
    async reasonOf({ toolCall }) {
      const tier = toolset.tierOf(toolCall.toolName);
      if (!tier || tier === 'read') return undefined;
      // The same tool call is the same agentdb call: this joins it, and runs nothing new.
      const started = await toolset.start(toolCall.toolName, toolCall.input, toolCall.toolCallId);
      return started.parked ? approvalReason(toolCall.input, started) : undefined;
    },
    async recordDecisions(messages) {
      const last = messages.at(-1);
      if (last?.role !== 'tool') return;
      for (const part of last.content) {
        if (part.type !== 'tool-approval-response') continue;
        const call = requestedCall(messages, part.approvalId);
        if (!call || !toolset.tierOf(call.toolName)) continue;
        const answer = await toolset.finish(call.toolName, call.input, call.toolCallId, {
          approved: part.approved,
          ...(part.reason ? { reason: part.reason } : {}),
        });
        // The first decision wins. agentdb approved (and ran) the write before the app's denial:
        // the SDK must run the tool to hear that outcome, or it would tell the model "denied".
        if (!part.approved && !isRefusal(answer)) {
          part.approved = true;
          delete part.reason;
        }
      }
    },
    async awaitDecisions(messages) {
      const answered = new Set(
        messages.flatMap((m) => (m.role === 'tool' ? m.content.filter((p) => p.type === 'tool-approval-response').map((p) => p.approvalId) : [])),
      );
      const content: ToolApprovalResponse[] = [];
      for (const m of messages) {
        if (m.role !== 'assistant' || typeof m.content === 'string') continue;
        for (const part of m.content) {
          if (part.type !== 'tool-approval-request' || answered.has(part.approvalId)) continue;
          const call = requestedCall(messages, part.approvalId);
          if (!call || !toolset.tierOf(call.toolName)) continue;
          const d = await toolset.decisionOf(call.toolName, call.input, call.toolCallId);
          content.push({ type: 'tool-approval-response', approvalId: part.approvalId, approved: d.approved, ...(d.reason ? { reason: d.reason } : {}) });
        }
      }
      return content.length ? { role: 'tool', content } : undefined;
    },
  };
}

/**
 * A parked write's reason for the person the app asks: the agent's rationale (DATA_WRITE_SQL's,
 * DATA_DROP_TABLE's, db_exec's `rationale`), then agentdb's approval, by which it is decided
 * elsewhere too (web page, CLI, HTTP).
 */
function approvalReason(input: unknown, parked: { callId: string; approval: { id: string } }): string {
  const rationale = (input as { rationale?: unknown } | null)?.rationale;
  const approval = `agentdb approval ${parked.approval.id} (call ${parked.callId})`;
  return typeof rationale === 'string' && rationale.trim() ? `${rationale.trim()} — ${approval}` : approval;
}

/** The tool call an SDK approval request is about, found in the run's messages. */
function requestedCall(messages: ModelMessage[], approvalId: string): { toolCallId: string; toolName: string; input: unknown } | undefined {
  const parts = messages.flatMap((m) => (m.role === 'assistant' && typeof m.content !== 'string' ? m.content : []));
  const request = parts.find((p) => p.type === 'tool-approval-request' && p.approvalId === approvalId) as { toolCallId: string } | undefined;
  const call = parts.find((p) => p.type === 'tool-call' && p.toolCallId === request?.toolCallId) as
    | { toolCallId: string; toolName: string; input: unknown }
    | undefined;
  return call;
}
