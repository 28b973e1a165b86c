import { UNTRUSTED_NOTE } from '../../src/contracts/tool-output.ts';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { errorEnvelope } from '../../src/contracts/envelope.ts';
import { McpExchange } from '../../src/http/mcp-exchange.ts';
import { mcpServer } from '../../src/mcp/server.ts';
import { toolResult } from '../../src/mcp/tool-result.ts';
import type { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import type { Principal } from '../../src/registry/principal.ts';

// mcpServer registers tools/call the way Protocol registers any handler, skipping Server's
// override (a second parse of the parsed request, and a parse of the result). That is only the
// same server if the result parse never changed a result, and a bad request is still answered
// as before: both checked here against the SDK's own registration.

const answers = {
  ok: { ok: true, callId: 'c1', tool: 'DATA_QUERY_SQL', credits: 1, result: { columns: ['v'], rows: [['a'], [null]], truncated: false } },
  refused: errorEnvelope('c2', 'DATA_WRITE_SQL', 'NOT_PERMITTED', 'writes to another agent\u2019s tables are never allowed'),
  queued: { ok: false, callId: 'c3', tool: 'DATA_QUERY_SQL', status: 'queued' },
  awaiting: {
    ok: false,
    callId: 'c4',
    tool: 'DATA_DROP_TABLE',
    status: 'awaiting_approval',
    approval: { id: 'a1', expiresAt: '2026-12-01T00:00:00.000Z', summary: 'drop t' },
  },
  approvalRequired: {
    ...errorEnvelope('c5', 'db_exec', 'APPROVAL_REQUIRED', 'needs a person'),
    approval: { id: 'a2', statement: 'DELETE FROM t', rationale: 'cleanup' },
  },
} as const;

const principal: Principal = { kind: 'agent', workspace: 'w', agent: 'a', keyId: 'k', settings: { database: 'agent' }, surface: { kind: 'data' } } as Principal;
const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };

async function post(server: Server, body: unknown) {
  const exchange = new McpExchange();
  await server.connect(exchange);
  return exchange.handle({ headers, body });
}

describe('tools/call registration', () => {
  for (const [kind, answer] of Object.entries(answers)) {
    it(`leaves a ${kind} result as CallToolResultSchema would return it`, () => {
      const result = toolResult(answer as never);
      expect(CallToolResultSchema.parse(result)).toStrictEqual(result);
    });
  }

  it('answers a malformed tools/call as the SDK registration does', async () => {
    const calls = { call: async () => answers.ok } as unknown as KeyedCalls;
    const ours = mcpServer(principal, { kind: 'workspace' }, { calls, approvalWaitMs: 1000 });
    const sdk = new Server({ name: 'agentdb', version: '0.1.0' }, { capabilities: { tools: {} } });
    sdk.setRequestHandler(CallToolRequestSchema, async () => toolResult(answers.ok as never));
    for (const params of [{}, { name: 7 }, { name: 'DATA_QUERY_SQL', arguments: 'x' }]) {
      const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params };
      const [a, b] = [await post(ours, body), await post(sdk, body)];
      expect(a.status).toBe(200);
      expect(a).toStrictEqual(b);
      expect((a.body as { error?: { code: number } }).error?.code).toBeDefined();
      await Promise.all([ours.close(), sdk.close()]);
    }
  });

  it('answers a well-formed call with the tool result', async () => {
    const calls = { call: async () => answers.ok } as unknown as KeyedCalls;
    const ours = mcpServer(principal, { kind: 'workspace' }, { calls, approvalWaitMs: 1000 });
    const answer = await post(ours, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } } });
    const result = (answer.body as { result: { isError: boolean; structuredContent: unknown } }).result;
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toStrictEqual({
      callId: 'c1',
      credits: 1,
      untrusted: true,
      untrustedNote: UNTRUSTED_NOTE,
      columns: ['v'],
      rows: [['a'], [null]],
      truncated: false,
    });
  });
});
