import { connectAnswering } from '../redis/connection.ts';
import { readExecutors } from '../shards/executor-status-publisher.ts';
import { keysFor } from '../redis/keys.ts';
import type { CommandContext } from './context.ts';
import { exitFor } from './exit-status.ts';

/**
 * `agentdb executors [--json]`: per child of each worker process, what it runs (database, call
 * id, op) and for how long, as the workers last published it (every second).
 */
export async function executors(ctx: CommandContext, flags: { json?: boolean }): Promise<number> {
  const redis = await connectAnswering(ctx.config.redisUrl, { name: 'agentdb-cli' });
  try {
    const workers = await readExecutors(redis, keysFor(ctx.config.prefix));
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify(workers)}\n`);
      return 0;
    }
    if (workers.length === 0) {
      ctx.stdout.write('no worker has published its executors in the last few seconds\n');
      return 0;
    }
    const now = Date.now();
    for (const w of workers) {
      const { pool } = w;
      ctx.stdout.write(
        `worker ${w.worker} (pid ${w.pid}, shards ${w.shards.join(',') || 'none'}): ${pool.size} children${pool.overflow ? ` + ${pool.overflow} overflow` : ''}, ` +
          `at most ${pool.workspaceShare} per workspace, ${pool.waiting} statements waiting, spare ${pool.spare ?? 'starting'}; ` +
          `as of ${((now - w.at) / 1000).toFixed(1)} s ago\n`,
      );
      ctx.stdout.write(`${['child', 'pid', 'state', 'database', 'call', 'op', 'running', 'behind'].join('\t')}\n`);
      for (const c of pool.children) {
        const running = c.runningMs === undefined ? '' : `${(c.runningMs / 1000).toFixed(1)} s`;
        ctx.stdout.write(
          `${[c.overflow ? `${c.child} (overflow)` : c.child, c.pid ?? '', c.state, c.database ?? '', c.callId ?? '', c.op ?? '', running, c.behind ?? ''].join('\t')}\n`,
        );
      }
    }
    return 0;
  } catch (err) {
    ctx.stderr.write(`agentdb executors: Redis did not answer: ${(err as Error).message}\n`);
    return exitFor('UNAVAILABLE');
  } finally {
    redis.disconnect();
  }
}
