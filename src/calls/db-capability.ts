import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { CallInput } from '../contracts/call.ts';
import { databaseId } from '../contracts/database-id.ts';
import { dbToolContracts, type DbToolName } from '../contracts/db-tools.ts';
import { describeIssues } from '../contracts/describe-issues.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import { agentName, workspaceName } from '../contracts/names.ts';
import type { AgentSettingsInput } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
import { dbToolSpan, traceparentContext } from '../tracing.ts';
import { applyDbPolicy, DB_POLICY_DECISIONS, translateDbCall, type DbPolicyDecision } from '../policy/db-surface.ts';
import type { CallAnswer } from './call-answers.ts';
import { AgentDbClient } from './client.ts';
import type { CallOptions } from './client-options.ts';
import { dbAnswer, type ApprovalRequiredAnswer } from './db-answers.ts';

/** What db_exec's policy function is told of one call (db-capability.md). */
export interface DbPolicyContext {
  /** The tool the policy decides for: only db_exec has a policy. */
  name: 'db_exec';
  /** The call's input as the model gave it: the SQL statement and the model's stated reason. */
  input: { statement: string; rationale: string };
}

/** db_exec's `policy`: one decision for every call, or a function deciding each one. */
export type DbPolicy = DbPolicyDecision | ((context: DbPolicyContext) => DbPolicyDecision | Promise<DbPolicyDecision>);

/** Options of {@link db}. */
export interface DbCapabilityOptions {
  /** The client the tools call through (its Redis, prefix and shard count). */
  client: AgentDbClient;
  /** The workspace and agent the calls are made as. */
  workspace: string;
  /** The registered agent (`agentdb agents set`) the calls are made as. */
  agent: string;
  /**
   * Which database the tools use: `"default"` (also `"agent"`, the default), the agent's own, or
   * `"workspace"`, the workspace's shared one. Any other name fails at once.
   */
  database?: string;
  /** `"write"` gives db_exec for INSERT, UPDATE, DELETE and REPLACE (default `"read"`). */
  mode?: 'read' | 'write';
  /** `"write"` gives db_exec for CREATE, ALTER and DROP (default `"read"`). */
  schemaMode?: 'read' | 'write';
  /** db_exec's policy (default: its calls run). Read tools have none. */
  policy?: DbPolicy;
  /** The agent's other settings, as on {@link AgentDbClient.call} (approval, sandbox, sharedData). */
  settings?: Omit<AgentSettingsInput, 'database'>;
}

/** Options of one tool execution: the call's id (to make it idempotent) and the client's call options. */
export type DbToolCallOptions = Omit<CallOptions, 'wait'> & {
  /** The call's id: the same id runs at most once (absent, a new one is made). */
  callId?: string;
};

/** What a db_* tool's `execute` answers: the call's answer, under the db_* tool's name. */
export type DbToolAnswer = CallAnswer | ApprovalRequiredAnswer;

/** One db_* tool for a runtime's own agent loop: what the model is shown, and how to run it. */
export interface DbTool {
  /** The db_* tool's name, as the model is shown it. */
  name: DbToolName;
  /** What the model is told the tool does (db-capability.md's words). */
  description: string;
  /** The JSON Schema of its input, exactly as db-capability.md gives it. */
  inputSchema: Record<string, unknown>;
  /**
   * Runs one call and answers it: never rejects for the agent's input (a refusal is an
   * `ok: false` answer with a code the model can act on). A db_exec under `require-approval`
   * answers APPROVAL_REQUIRED at once with the approval request; it runs once a person approves.
   * Rejects only for the runtime's own faults: a policy function that throws or answers
   * something other than a decision, or `signal` aborting the wait.
   */
  execute(input: unknown, opts?: DbToolCallOptions): Promise<DbToolAnswer>;
}

const DATABASES: Record<string, 'agent' | 'workspace'> = { default: 'agent', agent: 'agent', workspace: 'workspace' };

const options = z.strictObject({
  client: z.custom<AgentDbClient>((v) => v instanceof AgentDbClient, 'client must be an AgentDbClient'),
  workspace: workspaceName,
  agent: agentName,
  database: z.string({ error: 'database must be a string' }).default('default'),
  mode: z.enum(['read', 'write']).default('read'),
  schemaMode: z.enum(['read', 'write']).default('read'),
  policy: z
    .union([z.enum(DB_POLICY_DECISIONS as [DbPolicyDecision, ...DbPolicyDecision[]]), z.custom<Exclude<DbPolicy, string>>((v) => typeof v === 'function')], {
      error: `policy must be one of ${DB_POLICY_DECISIONS.join(', ')}, or a function of { name, input } returning one`,
    })
    .optional(),
  settings: z
    .looseObject({})
    .refine((s) => !('database' in s), 'settings.database: give the database as the database option')
    .optional(),
});

/**
 * The seed's database capability (db-capability.md) over an {@link AgentDbClient}, for a runtime
 * with its own agent loop: `db_query` and `db_schema`, and `db_exec` when `mode` or `schemaMode`
 * is `"write"`. Each tool's statement rules (one statement, a rationale, the kind of SQL each
 * mode allows) and `policy` are the db_* surface's own (`translateDbCall`), the same a registered
 * agent gets over MCP; the calls then pass agentdb's guard and approval rules like any other.
 *
 * @throws AgentDbError INVALID_ARGUMENTS at once for bad options, naming each one.
 * @example
 * const tools = db({ client, workspace: 'acme', agent: 'scout', mode: 'write', policy: 'require-approval' });
 * const answer = await tools.find((t) => t.name === 'db_query')!.execute({ statement: 'SELECT 1' });
 */
export function db(opts: DbCapabilityOptions): DbTool[] {
  const parsed = options.safeParse(opts ?? {});
  if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', `db(): ${describeIssues(parsed.error.issues)}`);
  const o = parsed.data;
  const database = Object.hasOwn(DATABASES, o.database) ? DATABASES[o.database] : undefined;
  if (!database)
    throw new AgentDbError(
      'INVALID_ARGUMENTS',
      `db(): Database ${JSON.stringify(o.database)} is not available: agentdb gives "default" (the agent's own) or "workspace".`,
    );
  const fixed = typeof o.policy === 'string' ? o.policy : 'allow';
  const surface = { kind: 'db' as const, mode: o.mode, schemaMode: o.schemaMode, policy: fixed };
  const decide = typeof o.policy === 'function' ? o.policy : undefined;
  const settings = { ...(o.settings as Omit<AgentSettingsInput, 'database'> | undefined), database };
  const dbId = database === 'workspace' ? databaseId(o.workspace) : databaseId(o.workspace, o.agent);

  const execute = async (name: DbToolName, input: unknown, callOpts: DbToolCallOptions = {}): Promise<DbToolAnswer> => {
    const { callId, ...rest } = callOpts;
    let t = translateDbCall(surface, name, input);
    if (t.ok && decide && t.dbTool === 'db_exec') {
      const decision = await decide({ name: 'db_exec', input: input as DbPolicyContext['input'] });
      if (!DB_POLICY_DECISIONS.includes(decision as DbPolicyDecision))
        throw new AgentDbError(
          'INVALID_ARGUMENTS',
          `db(): the policy function returned ${JSON.stringify(decision)}; it must return one of ${DB_POLICY_DECISIONS.join(', ')}.`,
        );
      t = applyDbPolicy(t, decision);
    }
    if (!t.ok) return errorEnvelope(callId ?? randomUUID(), name, t.code, t.detail);
    const call: CallInput = {
      workspace: o.workspace,
      agent: o.agent,
      settings: t.requireApproval ? { ...settings, approval: 'write' } : settings,
      tool: t.tool,
      // The shared database is the workspace scope: settings.database "workspace" only opens it.
      arguments: database === 'workspace' ? { ...t.arguments, scope: 'workspace' } : t.arguments,
      ...(t.introspect ? { introspect: true } : {}),
      ...(callId !== undefined ? { callId } : {}),
    };
    const statement = (input as { statement?: unknown }).statement;
    // require-approval answers at once (db-capability.md): the parked call runs once approved.
    const answer = await o.client.call(call, t.requireApproval ? { ...rest, wait: false } : rest);
    return dbAnswer(answer, t, dbId, statement);
  };

  return dbToolContracts(surface).map(({ name, description, inputSchema }) => ({
    name,
    description,
    inputSchema,
    execute: (input: unknown, callOpts?: DbToolCallOptions) => {
      const tracer = o.client.tracer;
      if (!tracer) return execute(name, input, callOpts);
      // The caller's trace is this span's parent; the client's own span continues it as its child.
      const { traceparent, tracestate, ...rest } = callOpts ?? {};
      return dbToolSpan(tracer, name, traceparentContext(traceparent, tracestate), () => execute(name, input, rest));
    },
  }));
}
