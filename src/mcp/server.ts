import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { KeyedCalls } from '../queue/keyed-calls.ts';
import type { Principal } from '../registry/principal.ts';
import { toolResult } from './tool-result.ts';
import { toolsFor, type McpEndpoint } from './toolkit.ts';

/** What an MCP server for one principal needs. */
export interface McpServerDeps {
  calls: KeyedCalls;
  /** How long a tool call waits for a person's decision before answering that it is pending. */
  approvalWaitMs: number;
  /** Called with faults (never agent errors), for the log. */
  onFault?: (err: unknown) => void;
}

/**
 * An MCP server speaking for one key's principal: `tools/list` shows what it may see on this
 * endpoint, `tools/call` goes through the same keyed-call core as `/v1/calls` (policy, call
 * keys, approvals). A tool not listed here is unknown here, whatever it is elsewhere.
 */
export function mcpServer(principal: Principal, endpoint: McpEndpoint, deps: McpServerDeps): Server {
  const server = new Server({ name: 'agentdb', version: '0.1.0' }, { capabilities: { tools: {} }, jsonSchemaValidator: sharedValidator() });
  const tools = toolsFor(principal, endpoint);
  const listed = new Set(tools.map((t) => t.name));

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args } = request.params;
    if (!listed.has(name)) {
      return toolResult(errorEnvelope('', name, 'UNKNOWN_TOOL', `"${name}" is not a tool on this endpoint.`));
    }
    try {
      const answer = await deps.calls.call(principal, { tool: name, arguments: args ?? {} }, { wait: true, maxWaitMs: deps.approvalWaitMs });
      return toolResult(answer);
    } catch (err) {
      // A fault (Redis down): the client gets a coded error, the log gets the cause.
      deps.onFault?.(err);
      return toolResult(errorEnvelope('', name, 'UNAVAILABLE', 'agentdb could not take the call; try again shortly.'));
    }
  });
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
