import { clientOf } from './client-of.ts';
import { callExit } from './call-answer.ts';
import type { CommandContext } from './context.ts';
import { callerFlag, nameFlag } from './name-flag.ts';
import { jsonLine } from './json-line.ts';

/**
 * `agentdb result CALL_ID --workspace W --agent A [--wait]`: the envelope of a finished call, or where it stands
 * (queued, running, awaiting approval); with --wait, blocks until it finishes however long a
 * person takes. Exit 0 when the call succeeded or is still on its way, otherwise as `agentdb call`
 * would have exited for its envelope (`exitFor` its code).
 */
export async function result(ctx: CommandContext, flags: { workspace: string; agent: string; wait?: boolean }, callId: string): Promise<number> {
  // A call id belongs to its caller: the same id of another workspace or agent is another call.
  const workspace = nameFlag('--workspace', flags.workspace);
  const agent = callerFlag(flags.agent);
  const { config } = ctx;
  const client = clientOf(config);
  try {
    const answer = await client.result(callId, { workspace, agent, wait: flags.wait ?? false });
    ctx.stdout.write(jsonLine(answer));
    return callExit(answer);
  } finally {
    await client.close();
  }
}
