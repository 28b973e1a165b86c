import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { CallInput } from '../contracts/call.ts';
import { errorBody, type ErrorBody } from '../errors.ts';
import type { AgentDbClient, CallAnswer } from '../calls/client.ts';
import { BatchOrder } from './batch-order.ts';
import { callOrUnavailable, failedWith } from './call-answer.ts';
import { EXIT, type CommandContext } from './context.ts';
import { jsonLine } from './json-line.ts';
import { exitForAll, type Failure } from './exit-status.ts';

/** Calls a batch keeps in flight at once. */
const BATCH_WINDOW = 64;

/** What a batch prints for a line that is no call: its line number stands in for a call id, as nothing was enqueued. */
interface BadLine {
  ok: false;
  line: number;
  error: ErrorBody;
}

/**
 * `agentdb call --batch FILE|-`: one call per non-empty line, up to {@link BATCH_WINDOW} in
 * flight, one output line per call in input order. Within a workspace the calls keep the
 * file's order where it matters ({@link BatchOrder}): a write starts after the calls before it
 * answered, and a read after the writes before it. A line that is not a JSON object is
 * answered in its place (`{ ok: false, line, error }`) and named on stderr with its line
 * number; the other lines still run. Exit 0 when every call succeeded, 3 when each that failed
 * may pass later (`exitForAll`), 1 otherwise, 2 when the file cannot be read.
 */
export async function runBatch(ctx: CommandContext, client: AgentDbClient, source: string, opts: { wait: boolean; timeoutMs: number }): Promise<number> {
  const lines = createInterface({ input: source === '-' ? process.stdin : createReadStream(source), crlfDelay: Infinity });
  const inFlight: Promise<CallAnswer | BadLine>[] = [];
  const order = new BatchOrder();
  const failures: Failure[] = [];
  const flushOne = async () => {
    const answer = await inFlight.shift()!;
    const failed = 'line' in answer ? answer.error : failedWith(answer);
    if (failed !== undefined) failures.push(failed);
    ctx.stdout.write(jsonLine(answer));
  };
  let n = 0;
  try {
    for await (const line of lines) {
      n++;
      if (line.trim() === '') continue;
      const input = parseLine(line);
      if (typeof input === 'string') {
        ctx.stderr.write(`agentdb call: --batch line ${n}: ${input}\n`);
        inFlight.push(Promise.resolve({ ok: false, line: n, error: errorBody('INVALID_ARGUMENTS', `Line ${n}: ${input}`) }));
      } else {
        inFlight.push(order.run(input.workspace, input.tool, () => callOrUnavailable(client, input, opts)));
      }
      if (inFlight.length >= BATCH_WINDOW) await flushOne();
    }
  } catch (err) {
    ctx.stderr.write(`agentdb call: cannot read ${source}: ${(err as Error).message}\n`);
    while (inFlight.length) await flushOne();
    return EXIT.usage;
  }
  while (inFlight.length) await flushOne();
  return exitForAll(failures);
}

/** The call a line holds, or what is wrong with it. */
function parseLine(line: string): CallInput | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    return `not valid JSON (${(err as Error).message})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return 'a call must be a JSON object: {"workspace","agent","settings","tool","arguments"}';
  }
  return value as CallInput;
}
