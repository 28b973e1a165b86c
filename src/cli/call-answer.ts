import type { CallInput } from '../contracts/call.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { AgentDbClient, CallAnswer } from '../calls/client.ts';
import type { CallOptions } from '../calls/client-options.ts';
import { EXIT } from './context.ts';
import { exitFor, type Failure } from './exit-status.ts';

/**
 * A call whose answer is an envelope even when Redis fails part way: the command's output
 * stays one JSON line per call, and the fault is a retryable UNAVAILABLE. (A Redis that does
 * not answer at all, the client answers UNAVAILABLE itself.)
 */
export async function callOrUnavailable(client: AgentDbClient, input: CallInput, opts: CallOptions): Promise<CallAnswer> {
  try {
    return await client.call(input, opts);
  } catch (err) {
    const tool = typeof input.tool === 'string' ? input.tool : '';
    return errorEnvelope(input.callId ?? '', tool, 'UNAVAILABLE', `Redis did not answer: ${(err as Error).message}`);
  }
}

/** The error a call failed with; none when it is ok or (with --no-wait) on its way: queued, running or parked for a person. */
export function failedWith(answer: CallAnswer): Failure | undefined {
  return answer.ok || answer.status !== undefined ? undefined : answer.error;
}

/** A call's exit status, whichever command prints its envelope (`call`, `result`). */
export function callExit(answer: CallAnswer): number {
  const failed = failedWith(answer);
  return failed === undefined ? EXIT.ok : exitFor(failed.code, failed.retryAfter);
}
