import type { Redis } from 'ioredis';
import { AgentDbError, errorBody, type ErrorCode } from '../errors.ts';
import { connectAnswering } from '../redis/connection.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import type { CommandContext, Output } from './context.ts';
import { exitFor } from './exit-status.ts';

/**
 * Runs one registry subcommand (`workspaces`, `agents`, `keys`, `members`) with a Redis
 * connection: exit 0 on success, `exitFor` its code when the registry refuses (the error as JSON on stdout). A
 * Redis that stops answering (UNAVAILABLE) is the service's fault, not a refusal: main says it in
 * one line on stderr, as it does one that never answered.
 * @param hints replace the registry's hint for these codes: its own are written for an agent's
 * tool calls (NOT_FOUND points at DATA_DESCRIBE_SCHEMA), not for the command that was run. A
 * NOT_FOUND given none gets {@link REGISTRY_NOT_FOUND_HINT}.
 */
export async function withRegistry(
  ctx: CommandContext,
  run: (redis: Redis, keys: Keys) => Promise<number>,
  hints: Partial<Record<ErrorCode, string>> = {},
): Promise<number> {
  const redis = await connectAnswering(ctx.config.redisUrl, { name: 'agentdb-cli' });
  try {
    return await run(redis, keysFor(ctx.config.prefix));
  } catch (err) {
    if (!(err instanceof AgentDbError) || err.code === 'UNAVAILABLE') throw err;
    ctx.stdout.write(`${JSON.stringify({ error: errorBody(err.code, err.detail, { NOT_FOUND: REGISTRY_NOT_FOUND_HINT, ...hints }) })}\n`);
    return exitFor(err.code);
  } finally {
    redis.disconnect();
  }
}

/**
 * What a registry command's NOT_FOUND tells a person to do. Review N6 (session 30): `agents set`
 * in a workspace not registered yet, or `keys revoke` of an unknown id, gave the hint of an
 * agent's tool calls ("DATA_DESCRIBE_SCHEMA lists tables and views, `agentdb approvals list`
 * approvals"), which has nothing to do with what was run.
 */
export const REGISTRY_NOT_FOUND_HINT =
  "The message names what is not registered. `agentdb workspaces list`, `agentdb agents list --workspace W`, `agentdb members list --workspace W` and `agentdb keys list --workspace W` show what is; run them, and this command, with the server's REDIS_URL and AGENTDB_PREFIX, or they look in another registry.";

/** Prints rows as aligned columns, the first row being the header. */
export function printTable(ctx: Output, table: string[][]): void {
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  for (const r of table)
    ctx.stdout.write(
      `${r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd()}\n`,
    );
}
