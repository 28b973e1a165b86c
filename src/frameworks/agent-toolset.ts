import { createHash, randomUUID } from 'node:crypto';
import type { AgentDbClient, AwaitingAnswer, CallAnswer, Decision } from '../calls/client.ts';
import type { Surface } from '../contracts/agent-profile.ts';
import type { CallInput } from '../contracts/call.ts';
import { databaseId } from '../contracts/database-id.ts';
import { dbToolContracts } from '../contracts/db-tools.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { AgentSettings } from '../contracts/settings.ts';
import { absentNulls, strictInputSchema } from '../contracts/strict-schema.ts';
import { toolContracts, type Tier } from '../contracts/tools.ts';
import { AgentDbError } from '../errors.ts';
import { toolResult } from '../mcp/tool-result.ts';
import { translateDbCall } from '../policy/db-surface.ts';
import type { AgentToolsOptions } from './toolset-options.ts';

/** One tool as the adapters declare it to their framework. */
export interface FrameworkTool {
  name: string;
  description: string;
  tier: Tier;
  /** The contract's JSON Schema, less what a bound scope fixes. */
  inputSchema: Record<string, unknown>;
  /** The same for strict function calling (OpenAI): every property required, optional ones nullable. */
  strictInputSchema: Record<string, unknown>;
}

/**
 * What a finished call gives the model: `text` (rows in an untrusted-data fence with a random
 * boundary; a refusal as its code, fenced reason and hint) and `data` (the same as structured
 * fields, marked untrusted), as an MCP client gets them.
 */
export interface ToolAnswer {
  /** The call id it ran (or was refused) under. */
  callId: string;
  /** Whether the call was refused or failed: the model is shown `text` as an error. */
  isError: boolean;
  /** What the model reads: rows fenced as untrusted data, or the refusal's code, fenced reason and hint. */
  text: string;
  /** The same as structured fields, marked untrusted. */
  data: Record<string, unknown>;
}

/** A call once started: finished, or parked for a person's decision. */
export type Started = { parked: false; answer: ToolAnswer } | { parked: true; callId: string; approval: AwaitingAnswer['approval'] };

/** A person's decision on a parked call, made in the framework's UI. */
export interface FrameworkDecision {
  approved: boolean;
  reason?: string;
}

/** One call as the engine runs it, or the refusal the surface answers before it is sent. */
type Planned = { ok: true; input: CallInput; tool: string; dbTool?: string } | { ok: false; answer: ToolAnswer };

/**
 * The part every framework adapter shares: the agent's tools from its registration, calls
 * through the client under a call id derived from the framework's own tool call id (so a run
 * resumed from a checkpoint, or a tool called again after approval, joins the same call), answers
 * formatted as MCP formats them, and decisions recorded through the client's decide, bound to
 * the call's approval as every decision is.
 */
export class AgentToolset {
  /** The tools, in the order the surface lists them. */
  readonly tools: FrameworkTool[];
  private readonly tiers: Map<string, Tier>;

  private constructor(
    private readonly client: AgentDbClient,
    private readonly opts: AgentToolsOptions,
    private readonly settings: AgentSettings,
    private readonly surface: Surface,
  ) {
    this.tools = toolsOf(surface, opts.scope);
    this.tiers = new Map(this.tools.map((t) => [t.name, t.tier]));
  }

  /**
   * Reads the agent's registration and checks what the adapter is asked for against it.
   * @throws AgentDbError NOT_FOUND for an agent not registered; NOT_PERMITTED for a surface or
   * scope the registration does not give it.
   */
  static async open(client: AgentDbClient, opts: AgentToolsOptions): Promise<AgentToolset> {
    const who = `${opts.workspace}/${opts.agent}`;
    const register = `agentdb agents set --workspace ${opts.workspace} --agent ${opts.agent} --database agent`;
    const agent = await client.registeredAgent(opts.workspace, opts.agent);
    if (!agent)
      throw new AgentDbError(
        'NOT_FOUND',
        // With its database named: `agents set` without --database registers it off, which
        // `open` then refuses (session 36, N13: the command suggested here led to that refusal).
        `Agent ${who} is not registered under prefix "${client.where.prefix}" at ${client.where.redisUrl}: the server's AGENTDB_PREFIX and REDIS_URL must match the client's; else run "${register}" first (--database workspace for the shared tables too).`,
      );
    const surface = agent.surface;
    if (opts.surface && opts.surface !== surface.kind) {
      throw new AgentDbError(
        'NOT_PERMITTED',
        `Agent ${who} is registered with the ${surface.kind} surface (${surface.kind === 'db' ? 'db_*' : 'DATA_*'} tools), not ${opts.surface}.`,
      );
    }
    const { database } = agent.settings;
    if (database === 'off')
      throw new AgentDbError(
        'DATABASE_OFF',
        `Agent ${who} is registered with settings.database "off" (the default of agents set without --database): it has no database tools. Run "${register}" (or --database workspace), with its other flags again: agents set replaces the agent's settings.`,
      );
    if (opts.scope === 'workspace' && (database !== 'workspace' || surface.kind === 'db')) {
      throw new AgentDbError(
        'NOT_PERMITTED',
        surface.kind === 'db'
          ? `Agent ${who} has the db surface, which reaches only its own database: scope "workspace" is not open to it.`
          : `Agent ${who} is registered with settings.database "agent": scope "workspace" (the shared tables) needs database "workspace".`,
      );
    }
    return new AgentToolset(client, opts, agent.settings, surface);
  }

  /** The tier of tool `name` (undefined for a name not on the surface). */
  tierOf(name: string): Tier | undefined {
    return this.tiers.get(name);
  }

  /**
   * The agentdb call id of a framework tool call: derived from the framework's id and the call
   * itself, so the same tool call sent again (after approval, on resume) is the same agentdb call,
   * and a framework that reuses ids across runs (scripted models do) still gets a new call for
   * new arguments.
   */
  callIdFor(name: string, args: unknown, frameworkCallId: string): string {
    const digest = createHash('sha256')
      .update(JSON.stringify([this.opts.workspace, this.opts.agent, name, frameworkCallId, args ?? {}]))
      .digest('base64url');
    return `fw_${digest.slice(0, 40)}`;
  }

  /**
   * Sends the call and answers once it has run or been parked for a person. A read waits for
   * its answer; a write answers as soon as it is parked, so the framework can ask its person.
   */
  async start(name: string, args: unknown, frameworkCallId: string): Promise<Started> {
    const planned = this.plan(name, args, frameworkCallId);
    if (!planned.ok) return { parked: false, answer: planned.answer };
    const read = this.tiers.get(name) === 'read';
    const answer = await this.client.call(planned.input, { wait: read, timeoutMs: this.timeoutMs() });
    if (answer.status === 'awaiting_approval') return { parked: true, callId: answer.callId, approval: answer.approval };
    return { parked: false, answer: this.answerOf(answer, planned) };
  }

  /**
   * The call's outcome, waiting as long as a person takes. With `decision` (made in the
   * framework's UI) it is first recorded in agentdb as the approver's decision, unless agentdb
   * has one already: the first decision wins, and the outcome is always agentdb's.
   * @throws AgentDbError when agentdb refuses the approver's decision (not a member, a key revoked),
   * the decision needs an approver the adapter was not given, or Redis does not answer
   * (UNAVAILABLE: the decision is not recorded; make it again once Redis answers).
   */
  async finish(name: string, args: unknown, frameworkCallId: string, decision?: FrameworkDecision): Promise<ToolAnswer> {
    const planned = this.plan(name, args, frameworkCallId);
    if (!planned.ok) return planned.answer;
    const first = await this.client.call(planned.input, { wait: false, timeoutMs: this.timeoutMs() });
    if (decision && !first.ok && !first.status && first.error.code === 'UNAVAILABLE') {
      // The app's decision was not recorded: it must hear so, not take agentdb as told.
      throw new AgentDbError(
        'UNAVAILABLE',
        `The ${decision.approved ? 'approval' : 'rejection'} of call ${first.callId} was not recorded in agentdb: ${first.error.message}`,
      );
    }
    if (first.status !== 'awaiting_approval') return this.answerOf(first.status ? await this.outcome(first.callId) : first, planned);
    if (decision) await this.decide(first, decision);
    return this.answerOf(await this.outcome(first.callId), planned);
  }

  /**
   * Waits for agentdb's decision on a parked call (a person on the web page, the CLI, HTTP) and
   * answers it with the call's outcome, for an app that resumes its run from it.
   */
  async decisionOf(name: string, args: unknown, frameworkCallId: string): Promise<FrameworkDecision & { answer: ToolAnswer }> {
    const answer = await this.finish(name, args, frameworkCallId);
    const refused = isRefusal(answer);
    return { approved: !refused, ...(refused ? { reason: answer.text } : {}), answer };
  }

  private async decide(parked: AwaitingAnswer, d: FrameworkDecision): Promise<void> {
    const approver = this.opts.approver;
    const decision = d.approved ? 'approve' : 'reject';
    if (!approver) {
      throw new AgentDbError(
        'NOT_PERMITTED',
        `Call ${parked.callId} was ${decision}d in the app, but the adapter has no approver (a member key or a decider) to record it in agentdb as.`,
      );
    }
    const proof = typeof approver === 'function' ? await approver({ callId: parked.callId, tool: parked.tool, approval: parked.approval, decision }) : approver;
    const result = await this.client.decide(parked.approval.id, { ...proof, decision, ...(d.reason ? { reason: d.reason } : {}) } as Decision);
    // Decided already (in agentdb, or a second app): the outcome is the first decision's.
    if (!result.ok && result.code !== 'APPROVAL_CONFLICT') throw new AgentDbError(result.code, result.detail);
  }

  private outcome(callId: string): Promise<CallAnswer> {
    return this.client.result(callId, { workspace: this.opts.workspace, agent: this.opts.agent, wait: true, followUp: true });
  }

  private timeoutMs(): number {
    return this.opts.timeoutMs ?? 30_000;
  }

  /** The framework's call as agentdb's: the surface's checks, the bound scope, strict mode's nulls. */
  private plan(name: string, args: unknown, frameworkCallId: string): Planned {
    // A read has no id of its own: never parked, it is never joined again, and an id of the
    // caller's own costs a claim in Redis and one in the ledger on disk.
    const own = this.tiers.get(name) !== 'read';
    const callId = own ? this.callIdFor(name, args, frameworkCallId) : randomUUID();
    const base = { ...(own ? { callId } : {}), workspace: this.opts.workspace, agent: this.opts.agent, settings: this.settings };
    const tool = this.tools.find((t) => t.name === name);
    const given = tool && args && typeof args === 'object' && !Array.isArray(args) ? absentNulls(args as Record<string, unknown>, tool.inputSchema) : args;
    if (this.surface.kind === 'db') {
      const t = translateDbCall(this.surface, name, given);
      if (!t.ok) return { ok: false, answer: formatted(errorEnvelope(callId, name, t.code, t.detail)) };
      const settings: AgentSettings = t.requireApproval ? { ...this.settings, approval: 'write' } : this.settings;
      return {
        ok: true,
        tool: name,
        dbTool: t.dbTool,
        input: { ...base, settings, tool: t.tool, arguments: t.arguments, ...(t.introspect ? { introspect: true } : {}) },
      };
    }
    const scope = this.opts.scope;
    if (scope && given && typeof given === 'object' && (given as { agent?: unknown }).agent !== undefined) {
      // Bound, the schemas leave `agent` out: a model naming one anyway would otherwise reach
      // another agent's tables (with the shared-data grant) past the scope the app bound.
      const detail = `agent: not an argument of ${name} here; every call is bound to scope "${scope}" (${scope === 'agent' ? 'your own tables' : 'the shared tables'}).`;
      return { ok: false, answer: formatted(errorEnvelope(callId, name, 'INVALID_ARGUMENTS', detail)) };
    }
    const bound = scope && given && typeof given === 'object' ? { ...given, scope } : given;
    return { ok: true, tool: name, input: { ...base, tool: name, arguments: bound ?? {} } };
  }

  private answerOf(answer: CallAnswer, planned: Extract<Planned, { ok: true }>): ToolAnswer {
    if (planned.dbTool === 'db_schema' && answer.ok) {
      return formatted({ ...answer, tool: 'db_schema', result: { database: databaseId(this.opts.workspace, this.opts.agent), schema: answer.result } });
    }
    return formatted(planned.dbTool ? ({ ...answer, tool: planned.dbTool } as CallAnswer) : answer);
  }
}

/** An answer as MCP gives it (`src/mcp/tool-result.ts`): fenced text for the model, fields for the app. */
function formatted(answer: CallAnswer): ToolAnswer {
  const r = toolResult(answer);
  return { callId: answer.callId, isError: r.isError === true, text: r.content.map((c) => c.text).join('\n'), data: r.structuredContent ?? {} };
}

/** The surface's tools; a bound scope takes `scope` and `agent` out of their schemas. */
function toolsOf(surface: Surface, scope: AgentToolsOptions['scope']): FrameworkTool[] {
  const contracts = surface.kind === 'db' ? dbToolContracts(surface) : toolContracts();
  return contracts.map((c) => {
    const inputSchema = scope ? unscoped(c.inputSchema) : c.inputSchema;
    return { name: c.name, description: c.description, tier: c.tier, inputSchema, strictInputSchema: strictInputSchema(inputSchema) };
  });
}

function unscoped(schema: Record<string, unknown>): Record<string, unknown> {
  const { scope: _s, agent: _a, ...properties } = (schema.properties ?? {}) as Record<string, unknown>;
  const required = ((schema.required as string[] | undefined) ?? []).filter((r) => r !== 'scope' && r !== 'agent');
  return { ...schema, properties, required };
}

/** Whether a parked call's outcome is a person's refusal (rejected, or expired undecided), not a run. */
export function isRefusal(answer: ToolAnswer): boolean {
  const code = (answer.data.error as { code?: string } | undefined)?.code;
  return code === 'APPROVAL_REJECTED' || code === 'APPROVAL_EXPIRED';
}
