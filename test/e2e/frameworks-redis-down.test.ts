import { generateText, stepCountIs, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { agentDbTools } from '../../src/frameworks/ai-sdk.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';
import { runCli } from '../helpers/processes.ts';

// A decision made in the app while Redis does not answer is not recorded in agentdb: the app
// must hear so (UNAVAILABLE), not believe agentdb was told.

let redis: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
let key: string;

beforeAll(async () => {
  redis = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: redis.url });
  await sb.pool();
  client = sb.client();
  const ok = async (...args: string[]) => {
    const out = await runCli(args, sb.env);
    expect(out.code, out.stderr).toBe(0);
    return out.stdout;
  };
  await ok('workspaces', 'set', '--workspace', 'acme', '--plan', 'pro');
  await ok('agents', 'set', '--workspace', 'acme', '--agent', 'clerk', '--database', 'agent', '--approval', 'write');
  key = (JSON.parse(await ok('members', 'add', '--workspace', 'acme', '--name', 'ada', '--role', 'admin', '--json')) as { key: string }).key;
});
afterAll(async () => {
  // Back first: the pool and the client close through it.
  await redis?.start();
  await sb?.cleanup();
  await redis?.stop();
  await redis?.remove();
});

describe('agentdb/ai-sdk while Redis is down', () => {
  it('recordDecisions rejects UNAVAILABLE instead of dropping the decision', async () => {
    const db = await agentDbTools(client, { workspace: 'acme', agent: 'clerk', approver: { key } });
    const model = new MockLanguageModelV3({
      doGenerate: async () => ({
        content: [
          { type: 'tool-call', toolCallId: 'down-1', toolName: 'DATA_WRITE_SQL', input: JSON.stringify({ sql: 'CREATE TABLE t (v)', rationale: 'keep' }) },
        ],
        finishReason: { unified: 'tool-calls', raw: undefined },
        usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
        warnings: [],
      }),
    });
    const messages: ModelMessage[] = [{ role: 'user', content: 'make a table' }];
    const first = await generateText({ model, tools: db.tools, stopWhen: stepCountIs(1), messages });
    const request = first.content.find((c) => c.type === 'tool-approval-request') as { approvalId: string } | undefined;
    expect(request).toBeDefined();
    messages.push(...first.response.messages, {
      role: 'tool',
      content: [{ type: 'tool-approval-response', approvalId: request!.approvalId, approved: false }],
    });
    await redis.stop();
    await expect(db.recordDecisions(messages)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });
});
