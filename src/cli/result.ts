import { AgentDbClient } from '../queue/client.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

/**
 * `agentdb result CALL_ID --workspace W --agent A [--wait]`: the envelope of a finished call, or where it stands
 * (queued, running, awaiting approval); with --wait, blocks until it finishes however long a
 * person takes. Exit 0 when the call succeeded or is still on its way, 1 otherwise.
 */
export async function result(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'result', {
    args: ctx.argv,
    allowPositionals: true,
    options: { wait: { type: 'boolean', default: false }, workspace: { type: 'string' }, agent: { type: 'string' } },
  });
  if (!parsed) return 2;
  const [callId, ...extra] = parsed.positionals;
  const { workspace, agent } = parsed.values;
  if (!callId || extra.length || workspace === undefined || agent === undefined) {
    // A call id belongs to its caller: the same id of another workspace or agent is another call.
    ctx.stderr.write('usage: agentdb result CALL_ID --workspace W --agent A [--wait]\n');
    return 2;
  }
  const { config } = ctx;
  const client = new AgentDbClient({ redisUrl: config.redisUrl, prefix: config.prefix, shardCount: config.shardCount, resultTtlS: config.resultTtlS });
  try {
    const answer = await client.result(callId, { workspace, agent, wait: parsed.values.wait });
    ctx.stdout.write(`${JSON.stringify(answer)}\n`);
    return answer.ok || 'status' in answer ? 0 : 1;
  } finally {
    await client.close();
  }
}
