import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { mcpServer } from '../mcp/server.ts';
import { mcpWaiting } from '../mcp/waiting-calls.ts';
import { clientOf } from './client-of.ts';
import { connectAnswering } from '../redis/connection.ts';
import { KeyedCalls } from '../calls/bearer-key-calls.ts';
import { keysFor } from '../redis/keys.ts';
import { KeyAuthenticator } from '../registry/principal.ts';
import { PrincipalCache } from '../registry/principal-cache.ts';
import { connectRedis, shownUrl } from '../redis/connection.ts';
import { UsageError, type CommandContext } from './context.ts';
import { exitFor } from './exit-status.ts';
import { answered, type Answers } from './stdio-drain.ts';
import { keyFrom, type KeyFlags } from './key-source.ts';

/**
 * `agentdb mcp --stdio`: the MCP server of `/mcp` over stdin/stdout, for a local MCP client that
 * starts agentdb itself. The key (AGENTDB_KEY, `--key-file PATH`, or `--key`) is checked at start and
 * again before every request (cached like the HTTP server's, so a revoked key stops at once);
 * calls go onto the queue like a runtime's, so workers must run for this prefix. Stdout carries only JSON-RPC; everything else goes to stderr.
 * Exit 0 when the client closes stdin (once what it sent before is answered), 1 for a key that does not work, 2 on bad flags.
 */
export async function mcp(ctx: CommandContext, flags: { stdio?: boolean } & KeyFlags): Promise<number> {
  if (!flags.stdio) throw new UsageError('give --stdio (the HTTP endpoint is POST /mcp on agentdb start)');
  // Stdin is the JSON-RPC stream: the key comes from a file or the environment.
  const key = await keyFrom(flags, { envName: 'AGENTDB_KEY', envValue: ctx.config.mcpKey, stdinAllowed: false }, ctx);
  if (!key) throw new UsageError('give the key in AGENTDB_KEY or --key-file PATH');
  const { config } = ctx;
  const redis = await connectAnswering(config.redisUrl, { name: 'agentdb-mcp' });
  const keys = keysFor(config.prefix);
  const principals = new PrincipalCache(connectRedis(config.redisUrl, { name: 'agentdb-mcp-registry' }), keys.registryChanges, config.keyCacheTtlMs);
  await principals.start();
  const auth = new KeyAuthenticator(redis, keys, principals);
  const principal = await auth.authenticate(key);
  if (!principal) {
    principals.close();
    redis.disconnect();
    // Where it looked, since the usual cause is a client config whose env lacks the server's
    // REDIS_URL or AGENTDB_PREFIX; nothing about the key itself (revoked, unknown, mistyped).
    ctx.stderr.write(
      `agentdb mcp: the key is not an active agent or member key\n` +
        `  (looked up in Redis at ${shownUrl(config.redisUrl)}, prefix ${JSON.stringify(config.prefix)}: a key works with the REDIS_URL and AGENTDB_PREFIX of the agentdb that minted it)\n`,
    );
    return exitFor('UNAUTHENTICATED');
  }
  const client = clientOf(config);
  const calls = new KeyedCalls(client);
  const server = mcpServer(
    principal,
    { kind: 'workspace' },
    {
      calls,
      approvalWaitMs: config.mcpApprovalWaitMs,
      ...mcpWaiting({ redis, keys, calls, approvalTtlMs: config.approvalTtlMs, resultTtlS: config.resultTtlS }),
      onFault: (err) => ctx.stderr.write(`agentdb mcp: ${String(err)}\n`),
      principalNow: () => auth.authenticate(key),
      principalKnown: () => auth.lastKnown(key),
    },
  );
  const transport = new StdioServerTransport();
  let answers: Answers | undefined;
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
    // On the end of stdin, answer what was read first: a client may write its requests and close.
    process.stdin.once('end', () => void (answers?.settled() ?? Promise.resolve()).then(resolve));
  });
  await server.connect(transport);
  answers = answered(transport);
  await closed;
  await server.close();
  await client.close();
  principals.close();
  redis.disconnect();
  return 0;
}
