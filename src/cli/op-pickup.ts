import { shownUrl } from '../redis/connection.ts';
import type { PickupWatch } from '../shards/shard-op-client.ts';
import type { CommandContext } from './context.ts';

// What an operator command (`history`, `restore`, `backup now`) does while no worker takes its
// shard op: a new user whose CLI had another AGENTDB_PREFIX than the server saw these commands
// wait without a word.

/** How long an operator command waits for a worker to take its op before withdrawing it. */
export const OP_PICKUP_TIMEOUT_MS = 30_000;

/**
 * Says on stderr when no worker has taken the command's op after a few seconds (the CLI's
 * REDIS_URL or AGENTDB_PREFIX is not the deployment's, or no worker runs), and withdraws it
 * after {@link OP_PICKUP_TIMEOUT_MS}: a restore must never run later, whenever a worker comes.
 */
export function pickupWatch(ctx: CommandContext, command: string): PickupWatch {
  return {
    timeoutMs: OP_PICKUP_TIMEOUT_MS,
    onUnclaimed: (waited) =>
      ctx.stderr.write(
        `agentdb ${command}: no worker has taken this after ${Math.round(waited / 1000)} s; still waiting (behind other calls of its shard, if a worker is busy); with no worker listening after ${OP_PICKUP_TIMEOUT_MS / 1000} s it is withdrawn. ` +
          `Is \`agentdb start\` or \`agentdb worker\` running with REDIS_URL=${shownUrl(ctx.config.redisUrl)} and AGENTDB_PREFIX=${ctx.config.prefix}?\n`,
      ),
  };
}
