import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { Protocol } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import { MAY_PARK, type PendingCallJoins } from '../calls/pending-call-joins.ts';
import { codeOf } from '../errors.ts';
import type { Principal } from '../registry/principal.ts';
import { RedisTaskStore, type McpTaskDeps } from './task-store.ts';
import { mcpToolCall } from './tool-call.ts';
import { toolsFor, type McpEndpoint, type SchemaVariant } from './toolkit.ts';

/** What an MCP server for one principal needs. */
export interface McpServerDeps {
  calls: KeyedCalls;
  /** How long a tool call waits for a person's decision before answering that it is pending. */
  approvalWaitMs: number;
  /**
   * MCP Tasks: given, the server offers task-augmented `tools/call` (and `tasks/get`,
   * `tasks/result`, `tasks/list`, `tasks/cancel`), a call that waits for a person answered at
   * once as a task.
   */
  tasks?: McpTaskDeps;
  /** Given, the same waiting write sent again without a call id of its own joins the first. */
  joins?: PendingCallJoins;
  /** Called with faults (never agent errors), for the log. */
  onFault?: (err: unknown) => void;
  /**
   * Who the key speaks for now, asked before every request. A stdio server lives as long as
   * its client, which may outlive the key: a revoked key must stop there too, and narrowed
   * settings apply. Absent: the principal given stays (an HTTP request's server lives for one
   * request).
   */
  principalNow?: () => Promise<Principal | undefined>;
  /**
   * Who the key was last found to be (`PrincipalCache.lastKnown`), for `tools/list` alone when
   * `principalNow` cannot ask Redis (UNAVAILABLE): a listing runs nothing and shows no data, and
   * a client that cannot list shows the server as broken (review N6, session 30).
   */
  principalKnown?: () => Principal | undefined;
  /** Which input schemas `tools/list` gives (default agentdb's own). */
  schemas?: SchemaVariant;
}

/** The answer to any request once the key no longer works. */
const keyGone = () => new McpError(-32001, 'Unauthorized: the key is no longer an active agent or member key.');

/**
 * An MCP server speaking for one key's principal: `tools/list` shows what it may see on this
 * endpoint, `tools/call` goes through the same keyed-call core as `/v1/calls` (policy, call
 * keys, approvals). A tool not listed here is unknown here, whatever it is elsewhere.
 */
export function mcpServer(principal: Principal, endpoint: McpEndpoint, deps: McpServerDeps): Server {
  const tasks = deps.tasks ? new RedisTaskStore(deps.tasks, principal) : undefined;
  const server = newServer(deps, tasks);
  // tasks/result waits for the call itself, as tools/call does: the SDK's own handler polls the
  // store each pollInterval and never lets go, which held a stopping server's close until its
  // drain grace ran out.
  if (tasks) {
    server.setRequestHandler(GetTaskPayloadRequestSchema, (request, extra) => tasks.awaitResult(request.params.taskId, deps.approvalWaitMs, extra.signal));
    // The SDK's own tasks/get, counted first (RedisTaskStore.polled): the SDK's cancel asks
    // getTask too, and is counted once, by the store's updateTaskStatus.
    server.setRequestHandler(GetTaskRequestSchema, async (request) => {
      await tasks.polled();
      const task = await tasks.getTask(request.params.taskId);
      if (!task) throw new McpError(ErrorCode.InvalidParams, 'Failed to retrieve task: Task not found');
      return { ...task };
    });
  }
  const current = async (): Promise<Principal> => {
    if (!deps.principalNow) return principal;
    const now = await deps.principalNow();
    if (!now) throw keyGone();
    return now;
  };

  const listing = async (): Promise<Principal> => {
    try {
      return await current();
    } catch (err) {
      const known = codeOf(err) === 'UNAVAILABLE' ? deps.principalKnown?.() : undefined;
      if (!known) throw err;
      return known;
    }
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = toolsFor(await listing(), endpoint, deps.schemas);
    // A tool whose calls can wait for a person may be called as a task; the others answer at once.
    return { tools: tasks ? tools.map((t) => (MAY_PARK.has(t.name) ? { ...t, execution: { taskSupport: 'optional' as const } } : t)) : [...tools] };
  });

  // Registered as Protocol registers any handler (the request parsed against CallToolRequestSchema
  // first, a failure answered as before) rather than through Server's override for tools/call,
  // which (SDK 1.32) parses the already parsed request against the same schema a second time
  // and then the result against CallToolResultSchema. Every result here is toolResult's, which
  // that parse returns unchanged, and a bad request is refused by the first parse as before
  // (test/unit/mcp-server-registration.test.ts); the two parses only added CPU and a few KB of
  // garbage to every /mcp call (an /mcp request allocates about 46 KB with a stub call behind it).
  Protocol.prototype.setRequestHandler.call(server, CallToolRequestSchema, mcpToolCall(endpoint, deps, current, tasks));
  return server;
}

/**
 * The server's identity and capabilities, the same whoever asks, answering `initialize` and
 * `ping` (the SDK's own handlers) and nothing else: what `/mcp` answers those with while the
 * bearer's key cannot be checked (Redis does not answer). Neither says anything of a key or its data.
 */
export function mcpInfoServer(deps: Pick<McpServerDeps, 'tasks'>): Server {
  return newServer(deps);
}

/** An SDK server with agentdb's name and capabilities: tasks when `deps.tasks` is given (kept in `store`, when one is). */
function newServer(deps: Pick<McpServerDeps, 'tasks'>, store?: RedisTaskStore): Server {
  return new Server(
    { name: 'agentdb', version: '0.1.0' },
    {
      capabilities: { tools: {}, ...(deps.tasks ? { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } } : {}) },
      jsonSchemaValidator: sharedValidator(),
      ...(store ? { taskStore: store } : {}),
    },
  );
}

/**
 * One JSON Schema validator for every server of the process. The SDK makes a new Ajv per
 * server unless given one, which cost about a millisecond per stateless `/mcp` request, for a
 * validator a tools-only server never uses (it validates elicitation answers).
 */
let validator: AjvJsonSchemaValidator | undefined;
function sharedValidator(): AjvJsonSchemaValidator {
  validator ??= new AjvJsonSchemaValidator();
  return validator;
}
