import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { CallInput } from '../contracts/call.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import { AgentDbClient, type CallAnswer } from '../queue/client.ts';
import type { Envelope } from '../contracts/envelope.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

/** Calls a batch keeps in flight at once. */
const BATCH_WINDOW = 64;

type Answer = CallAnswer;

/**
 * `agentdb call …`: one call (TOOL ARGS_JSON) or a batch of JSON lines; prints one envelope
 * line per call, in input order. Exit 0 when every call succeeded (or, with --no-wait, is on
 * its way or waits for a person), 1 otherwise.
 */
export async function call(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'call', {
    args: ctx.argv,
    allowPositionals: true,
    options: {
      workspace: { type: 'string' },
      agent: { type: 'string' },
      settings: { type: 'string' },
      'no-wait': { type: 'boolean', default: false },
      timeout: { type: 'string', default: '30' },
      batch: { type: 'string' },
    },
  });
  if (!parsed) return 2;
  const { values, positionals } = parsed;
  const timeoutS = Number(values.timeout);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0) {
    ctx.stderr.write('agentdb call: --timeout takes a number of seconds above 0\n');
    return 2;
  }
  const opts = { wait: !values['no-wait'], timeoutMs: timeoutS * 1000 };
  const { config } = ctx;
  const client = new AgentDbClient({
    redisUrl: config.redisUrl,
    prefix: config.prefix,
    shardCount: config.shardCount,
    resultTtlS: config.resultTtlS,
    maxCallBytes: config.maxCallBytes,
  });
  try {
    if (values.batch !== undefined) return await runBatch(ctx, client, values.batch, opts);
    if (positionals.length < 1 || positionals.length > 2) {
      ctx.stderr.write('agentdb call: give TOOL and ARGS_JSON, or --batch FILE|-\n');
      return 2;
    }
    const [tool, argsJson = '{}'] = positionals as [string, string?];
    const input = parseInput(() => ({
      workspace: values.workspace,
      agent: values.agent,
      settings: values.settings === undefined ? undefined : parseJson(values.settings, '--settings'),
      tool,
      arguments: parseJson(argsJson, 'ARGS_JSON'),
    }), tool);
    const answer = input.call ? await callOrUnavailable(client, input.call, opts) : input.envelope;
    ctx.stdout.write(`${JSON.stringify(answer)}\n`);
    return succeeded(answer) ? 0 : 1;
  } finally {
    await client.close();
  }
}

async function runBatch(
  ctx: CommandContext,
  client: AgentDbClient,
  source: string,
  opts: { wait: boolean; timeoutMs: number },
): Promise<number> {
  const lines = createInterface({ input: source === '-' ? process.stdin : createReadStream(source), crlfDelay: Infinity });
  const inFlight: Promise<Answer>[] = [];
  let allOk = true;
  const flushOne = async () => {
    const answer = await inFlight.shift()!;
    allOk &&= succeeded(answer);
    ctx.stdout.write(`${JSON.stringify(answer)}\n`);
  };
  try {
    for await (const line of lines) {
      if (line.trim() === '') continue;
      const input = parseInput(() => parseJson(line, 'batch line') as CallInput);
      inFlight.push(input.call ? callOrUnavailable(client, input.call, opts) : Promise.resolve(input.envelope));
      if (inFlight.length >= BATCH_WINDOW) await flushOne();
    }
  } catch (err) {
    ctx.stderr.write(`agentdb call: cannot read ${source}: ${(err as Error).message}\n`);
    while (inFlight.length) await flushOne();
    return 2;
  }
  while (inFlight.length) await flushOne();
  return allOk ? 0 : 1;
}

/**
 * A call whose answer is an envelope even when Redis cannot be reached: the command's output
 * stays one JSON line per call, and the fault is a retryable UNAVAILABLE.
 */
async function callOrUnavailable(client: AgentDbClient, input: CallInput, opts: { wait: boolean; timeoutMs: number }): Promise<Answer> {
  try {
    return await client.call(input, opts);
  } catch (err) {
    const callId = input.callId ?? randomUUID();
    return errorEnvelope(callId, typeof input.tool === 'string' ? input.tool : '', 'UNAVAILABLE', `Redis did not answer: ${(err as Error).message}`);
  }
}

class BadJson extends Error {}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new BadJson(`${what} is not valid JSON: ${(err as Error).message}`);
  }
}

type Parsed = { call: CallInput; envelope?: undefined } | { call?: undefined; envelope: Envelope };

/** Builds the call input, or the error envelope that bad JSON deserves (naming `tool` when known). */
function parseInput(build: () => unknown, tool = ''): Parsed {
  try {
    const input = build();
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      return { envelope: errorEnvelope(randomUUID(), tool, 'INVALID_ARGUMENTS', 'A call must be a JSON object.') };
    }
    return { call: input as CallInput };
  } catch (err) {
    if (err instanceof BadJson) return { envelope: errorEnvelope(randomUUID(), tool, 'INVALID_ARGUMENTS', err.message) };
    throw err;
  }
}

/** Ok, or (with --no-wait) on its way: queued, running or parked for a person. */
function succeeded(answer: Answer): boolean {
  return answer.ok || 'status' in answer;
}
