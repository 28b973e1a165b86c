/**
 * agentdb's tools for LangChain (`@langchain/core` 1) in a LangGraph graph (`@langchain/langgraph` 1):
 * `import { agentDbTools } from 'agentdb/langchain'`. A write that agentdb parks for a person
 * calls LangGraph's `interrupt`: the graph stops, its checkpointer keeps the run, and
 * `Command({ resume: { decision: 'approve' | 'reject' } })` resumes it, the decision recorded in
 * agentdb as the approver's; {@link LangChainAgentDb.awaitDecision} answers that resume value
 * from a decision made in agentdb instead.
 * @packageDocumentation
 */
import type * as LangChainTools from '@langchain/core/tools';
import type { StructuredToolInterface } from '@langchain/core/tools';
import type * as LangGraph from '@langchain/langgraph';
import { z } from 'zod';
import type { AgentDbClient } from '../calls/client.ts';
import { AgentDbError } from '../errors.ts';
import { AgentToolset, type FrameworkTool } from './agent-toolset.ts';
import type { AgentToolsOptions } from './toolset-options.ts';
import { loadFramework } from './framework-package.ts';

export type { AgentToolsOptions, Approver, ApprovalAsk, DecisionProof } from './toolset-options.ts';

const lc = await loadFramework<typeof LangChainTools>({ adapter: 'agentdb/langchain', name: '@langchain/core', module: '@langchain/core/tools', majors: [1] });
const lg = await loadFramework<typeof LangGraph>({ adapter: 'agentdb/langchain', name: '@langchain/langgraph', module: '@langchain/langgraph', majors: [1] });

/** The value a parked call interrupts the graph with: what the person is asked to decide. */
export interface AgentDbInterrupt {
  /** Tells this interrupt from others the graph raises. */
  kind: 'agentdb.approval';
  /** The tool, and the arguments the model called it with. */
  tool: string;
  /** The arguments the model called `tool` with. */
  arguments: unknown;
  /** The framework's tool call id. */
  toolCallId: string;
  /** The agentdb call id, parked until the decision. */
  callId: string;
  /** agentdb's approval: its id, tier, expiry and the write's effect when known. */
  approval: Record<string, unknown> & { id: string; expiresAt: string };
}

/** The resume value (`new Command({ resume })`) for an {@link AgentDbInterrupt}. */
export interface AgentDbResume {
  /** What the person decided. */
  decision: 'approve' | 'reject';
  /** The person's reason, kept with the approval record. */
  reason?: string;
}

/** What {@link agentDbTools} gives an app. */
export interface LangChainAgentDb {
  /** The agent's tools: bind them to the model and give them to the graph's ToolNode. */
  tools: StructuredToolInterface[];
  /** True for an interrupt value one of these tools raised. */
  owns(value: unknown): value is AgentDbInterrupt;
  /**
   * Waits for agentdb's decision (web page, CLI, HTTP) on an interrupt's call and answers the
   * resume value, for an app that resumes the graph from agentdb's decision.
   */
  awaitDecision(value: AgentDbInterrupt): Promise<AgentDbResume>;
}

/**
 * The registered agent's tools (DATA_* or db_*) as LangChain tools over `client`. Each answers
 * its text (rows fenced) as the content the model reads and the structured fields as the
 * message's artifact.
 * @throws AgentDbError NOT_FOUND, NOT_PERMITTED or DATABASE_OFF when the registration does not give what is asked (see {@link AgentToolset.open}).
 */
export async function agentDbTools(client: AgentDbClient, opts: AgentToolsOptions): Promise<LangChainAgentDb> {
  const toolset = await AgentToolset.open(client, opts);
  const make = (t: FrameworkTool) =>
    lc.tool(
      async (input: unknown, config?: { toolCall?: { id?: string } }) => {
        const toolCallId = config?.toolCall?.id ?? '';
        const started = await toolset.start(t.name, input, toolCallId);
        if (!started.parked) return [started.answer.text, started.answer.data];
        // Run again from the checkpoint on resume: the same tool call is the same agentdb call, still parked or decided since.
        const resume = lg.interrupt<AgentDbInterrupt, AgentDbResume>({
          kind: 'agentdb.approval',
          tool: t.name,
          arguments: input,
          toolCallId,
          callId: started.callId,
          approval: started.approval,
        });
        if (resume?.decision !== 'approve' && resume?.decision !== 'reject') {
          throw new AgentDbError(
            'INVALID_ARGUMENTS',
            `Resume agentdb's interrupt with { decision: "approve" | "reject", reason? }, not ${JSON.stringify(resume) ?? 'nothing'}.`,
          );
        }
        const answer = await toolset.finish(t.name, input, toolCallId, {
          approved: resume.decision === 'approve',
          ...(resume.reason ? { reason: resume.reason } : {}),
        });
        return [answer.text, answer.data];
      },
      // The contract as the model's JSON Schema (zod's meta), checked by agentdb alone: LangChain
      // checks a JSON Schema itself before the tool runs, and answers what it rejects in its own
      // words, where agentdb answers INVALID_ARGUMENTS naming the field, with a hint.
      { name: t.name, description: t.description, schema: z.any().meta(t.inputSchema), responseFormat: 'content_and_artifact' },
    ) as unknown as StructuredToolInterface;
  const owns = (value: unknown): value is AgentDbInterrupt =>
    !!value && typeof value === 'object' && (value as AgentDbInterrupt).kind === 'agentdb.approval' && !!toolset.tierOf((value as AgentDbInterrupt).tool);
  return {
    tools: toolset.tools.map(make),
    owns,
    async awaitDecision(value) {
      const d = await toolset.decisionOf(value.tool, value.arguments, value.toolCallId);
      return { decision: d.approved ? 'approve' : 'reject', ...(d.reason ? { reason: d.reason } : {}) };
    },
  };
}
