import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { mcpServer } from '../mcp/server.ts';
import { AgentDbClient } from '../queue/client.ts';
import { connectRedis } from '../queue/connection.ts';
import { KeyedCalls } from '../queue/keyed-calls.ts';
import { keysFor } from '../queue/keys.ts';
import { KeyAuthenticator } from '../registry/principal.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

/**
 * `agentdb mcp --stdio --key KEY`: the MCP server of `/mcp` over stdin/stdout, for a local MCP
 * client that starts agentdb itself. The key (`--key`, or AGENTDB_KEY) is checked once at
 * start; calls go onto the queue like a runtime's, so workers must run for this prefix. Stdout carries only JSON-RPC; everything else goes to stderr.
 * Exit 0 when the client closes stdin, 1 for a key that does not work, 2 on bad flags.
 */
export async function mcp(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'mcp', { args: ctx.argv, options: { stdio: { type: 'boolean', default: false }, key: { type: 'string' } } });
  if (!parsed) return 2;
  const { values } = parsed;
  if (!values.stdio) {
    ctx.stderr.write('agentdb mcp: give --stdio (the HTTP endpoint is POST /mcp on agentdb start)\n');
    return 2;
  }
  const key = values.key ?? process.env.AGENTDB_KEY;
  if (!key) {
    ctx.stderr.write('agentdb mcp: give --key KEY (or AGENTDB_KEY)\n');
    return 2;
  }
  const { config } = ctx;
  const redis = connectRedis(config.redisUrl, { name: 'agentdb-mcp' });
  const principal = await new KeyAuthenticator(redis, keysFor(config.prefix)).authenticate(key);
  redis.disconnect();
  if (!principal) {
    ctx.stderr.write('agentdb mcp: the key is not an active agent or member key\n');
    return 1;
  }
  const client = new AgentDbClient({ redisUrl: config.redisUrl, prefix: config.prefix, shardCount: config.shardCount, resultTtlS: config.resultTtlS });
  const server = mcpServer(principal, { kind: 'workspace' }, {
    calls: new KeyedCalls(client),
    approvalWaitMs: config.mcpApprovalWaitMs,
    onFault: (err) => ctx.stderr.write(`agentdb mcp: ${String(err)}\n`),
  });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
    process.stdin.once('end', resolve);
  });
  await server.connect(transport);
  await closed;
  await server.close();
  await client.close();
  return 0;
}
