import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { Protocol } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import type { Principal } from '../registry/principal.ts';
import { toolResult } from './tool-result.ts';
import { toolsFor, type McpEndpoint, type SchemaVariant } from './toolkit.ts';
import { absentNulls } from '../contracts/strict-schema.ts';

/** What an MCP server for one principal needs. */
export interface McpServerDeps {
  calls: KeyedCalls;
  /** How long a tool call waits for a person's decision before answering that it is pending. */
  approvalWaitMs: number;
  /** Called with faults (never agent errors), for the log. */
  onFault?: (err: unknown) => void;
  /**
   * Who the key speaks for now, asked before every request. A stdio server lives as long as
   * its client, which may outlive the key: a revoked key must stop there too, and narrowed
   * settings apply. Absent: the principal given stays (an HTTP request's server lives for one
   * request).
   */
  principalNow?: () => Promise<Principal | undefined>;
  /** Which input schemas `tools/list` gives (default agentdb's own). */
  schemas?: SchemaVariant;
}

/**
 * The `_meta` key of `tools/call` params under which an MCP client names its own call id (the
 * spec's `_meta` takes prefixed keys for an implementation's own use). With it, a call is the
 * caller's idempotency key as on every other surface: sent again, the same call answers the
 * first one's outcome; another call under the id answers IDEMPOTENCY_CONFLICT.
 */
export const CALL_ID_META = 'agentdb/callId';

/** The answer to any request once the key no longer works. */
const keyGone = () => new McpError(-32001, 'Unauthorized: the key is no longer an active agent or member key.');

/**
 * An MCP server speaking for one key's principal: `tools/list` shows what it may see on this
 * endpoint, `tools/call` goes through the same keyed-call core as `/v1/calls` (policy, call
 * keys, approvals). A tool not listed here is unknown here, whatever it is elsewhere.
 */
export function mcpServer(principal: Principal, endpoint: McpEndpoint, deps: McpServerDeps): Server {
  const server = new Server({ name: 'agentdb', version: '0.1.0' }, { capabilities: { tools: {} }, jsonSchemaValidator: sharedValidator() });
  const current = async (): Promise<Principal> => {
    if (!deps.principalNow) return principal;
    const now = await deps.principalNow();
    if (!now) throw keyGone();
    return now;
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [...toolsFor(await current(), endpoint, deps.schemas)] }));

  type CallToolHandler = Parameters<typeof server.setRequestHandler<typeof CallToolRequestSchema>>[1];
  const callTool: CallToolHandler = async (request, extra) => {
    const { name, arguments: args, _meta: meta } = request.params;
    const callId = meta?.[CALL_ID_META];
    if (callId !== undefined && typeof callId !== 'string') {
      return toolResult(
        errorEnvelope('', name, 'INVALID_ARGUMENTS', `_meta["${CALL_ID_META}"] must be a string (the call id), got ${JSON.stringify(callId)}.`),
      );
    }
    let principal: Principal;
    try {
      principal = await current();
    } catch (err) {
      if (err instanceof McpError) throw err;
      deps.onFault?.(err);
      return toolResult(errorEnvelope('', name, 'UNAVAILABLE', 'agentdb could not take the call; try again shortly.'));
    }
    // A protocol error, as the spec (2025-06-18 and later, tools) has it: no tool ran, and a
    // client checks the name it sent, not a result.
    const tool = toolsFor(principal, endpoint).find((t) => t.name === name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    try {
      const answer = await deps.calls.call(
        principal,
        // Null for an optional argument is its absence, as the strict schemas give it.
        { tool: name, arguments: absentNulls(args ?? {}, tool.inputSchema), ...(callId !== undefined ? { callId } : {}) },
        // Cancelled (notifications/cancelled) or its connection gone (the server closes): the
        // wait stops listening at once; the SDK answers nothing for a cancelled request.
        { wait: true, maxWaitMs: deps.approvalWaitMs, signal: extra.signal },
      );
      return toolResult(answer);
    } catch (err) {
      if (extra.signal.aborted) throw err;
      // A fault (Redis down): the client gets a coded error, the log gets the cause.
      deps.onFault?.(err);
      return toolResult(errorEnvelope(callId ?? '', name, 'UNAVAILABLE', 'agentdb could not take the call; try again shortly.'));
    }
  };
  // Registered as Protocol registers any handler (the request parsed against CallToolRequestSchema
  // first, a failure answered as before) rather than through Server's override for tools/call,
  // which (SDK 1.32) parses the already parsed request against the same schema a second time
  // and then the result against CallToolResultSchema. Every result here is toolResult's, which
  // that parse returns unchanged, and a bad request is refused by the first parse as before
  // (test/unit/mcp-server-registration.test.ts); the two parses only added CPU and a few KB of
  // garbage to every /mcp call (an /mcp request allocates about 46 KB with a stub call behind it).
  Protocol.prototype.setRequestHandler.call(server, CallToolRequestSchema, callTool);
  return server;
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
