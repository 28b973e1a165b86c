import type { CallInput } from '../contracts/call.ts';
import { describeIssues } from '../contracts/describe-issues.ts';
import { agentSettings } from '../contracts/settings.ts';
import type { AgentDbClient, AwaitingAnswer, CallAnswer, PendingAnswer } from '../calls/client.ts';
import { clientOf } from './client-of.ts';
import { callExit, callOrUnavailable } from './call-answer.ts';
import { runBatch } from './call-batch.ts';
import { interruptedNote, parkedNote, queuedNote } from './call-notes.ts';
import { EXIT, UsageError, type CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';
import { interruption } from './signals.ts';
import { jsonLine } from './json-line.ts';

/** `agentdb call`'s flags, as commander parses them. */
export interface CallFlags {
  workspace?: string;
  agent?: string;
  settings?: string;
  /** The caller's own call id: its idempotency key (the same call again answers the first one). */
  callId?: string;
  wait: boolean;
  /** Seconds. */
  timeout: number;
  batch?: string;
}

/** How long a waited call may sit untaken before the command says so (it goes on waiting). */
const QUEUED_NOTE_MS = 3000;

/**
 * `agentdb call …`: one call (TOOL ARGS_JSON) or a batch of JSON lines; prints one envelope
 * line per call, in input order. Exit 0 when every call succeeded (or, with --no-wait, is on
 * its way or waits for a person), otherwise by the failures' codes (`exitFor`, `exitForAll`), 2
 * for a command line that called nothing.
 */
export async function call(ctx: CommandContext, flags: CallFlags, tool?: string, argsJson?: string): Promise<number> {
  const opts = { wait: flags.wait, timeoutMs: flags.timeout * 1000 };
  if (flags.batch !== undefined) {
    if (tool !== undefined) throw new UsageError('with --batch the calls come from FILE, one per line: give no TOOL or ARGS_JSON');
    for (const flag of ['workspace', 'agent', 'settings'] as const) {
      if (flags[flag] !== undefined) throw new UsageError(`--${flag} goes inside each line of a --batch, not on the command line`);
    }
    if (flags.callId !== undefined) throw new UsageError('--call-id goes inside each line of a --batch ("callId"), not on the command line');
    const source = flags.batch;
    return withClient(ctx, (client) => runBatch(ctx, client, source, opts));
  }
  if (tool === undefined) throw new UsageError('give TOOL and ARGS_JSON, or --batch FILE|-');
  if (flags.workspace === undefined) throw new UsageError('--workspace is required: the workspace the call belongs to');
  if (flags.agent === undefined) throw new UsageError('--agent is required: the agent making the call');
  const input = {
    workspace: nameFlag('--workspace', flags.workspace),
    agent: nameFlag('--agent', flags.agent),
    ...(flags.settings === undefined ? {} : { settings: settingsFlag(flags.settings) }),
    ...(flags.callId === undefined ? {} : { callId: flags.callId }),
    tool,
    arguments: jsonFlag(argsJson ?? '{}', 'ARGS_JSON', `'{"sql":"SELECT 1"}'`),
  } as CallInput;
  return withClient(ctx, async (client) => {
    const answer = opts.wait ? await waitedCall(ctx, client, input, opts.timeoutMs) : await callOrUnavailable(client, input, opts);
    if (answer === 'interrupted') return EXIT.interrupted;
    ctx.stdout.write(jsonLine(answer));
    return callExit(answer);
  });
}

async function withClient(ctx: CommandContext, fn: (client: AgentDbClient) => Promise<number>): Promise<number> {
  const { config } = ctx;
  const client = clientOf(config);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/**
 * A waited call that tells the person at the terminal, on stderr, what it waits for: a person
 * to decide (at once, with the commands that decide it), or a worker (after a few seconds). On
 * Ctrl-C it stops waiting, says where the call stays, and answers 'interrupted'.
 */
async function waitedCall(ctx: CommandContext, client: AgentDbClient, input: CallInput, timeoutMs: number): Promise<CallAnswer | 'interrupted'> {
  let last: PendingAnswer | AwaitingAnswer | undefined;
  let queuedTimer: NodeJS.Timeout | undefined;
  const onStatus = (status: PendingAnswer | AwaitingAnswer) => {
    last = status;
    if (status.status === 'awaiting_approval') {
      clearTimeout(queuedTimer);
      ctx.stderr.write(parkedNote(status));
      return;
    }
    if (status.status !== 'queued') return;
    queuedTimer = setTimeout(async () => {
      const now = await client.result(status.callId, { workspace: input.workspace, agent: input.agent, followUp: true }).catch(() => undefined);
      if (now?.status === 'queued' && last === status) ctx.stderr.write(queuedNote(status.callId, QUEUED_NOTE_MS, timeoutMs, ctx.config.prefix));
    }, QUEUED_NOTE_MS).unref();
  };
  const stop = interruption();
  try {
    const answer = callOrUnavailable(client, input, { wait: true, timeoutMs, onStatus });
    const first = await Promise.race([answer, stop.signal.then(() => 'interrupted' as const)]);
    if (first === 'interrupted') {
      ctx.stderr.write(last ? interruptedNote(last.callId, input, last) : 'agentdb call: stopped before the call was enqueued; nothing was called.\n');
    }
    return first;
  } finally {
    clearTimeout(queuedTimer);
    stop.stop();
  }
}

/**
 * A flag's JSON. A shell that ate the quotes is the usual cause, so the message shows a
 * quoted example.
 * @throws UsageError when it is not JSON.
 */
function jsonFlag(text: string, what: string, example: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${what} is not valid JSON (${(err as Error).message}); quote it for the shell, e.g. ${example}`);
  }
}

/**
 * `--settings`, checked here against the settings' schema: a bad value is a bad command line
 * (exit 2, as the README says), not a failed call (exit 1, INVALID_ARGUMENTS from the client).
 * In the words the call's refusal would have used. The value goes on as given: the client
 * applies the defaults.
 * @throws UsageError when it is not JSON or not settings.
 */
function settingsFlag(text: string): unknown {
  const settings = jsonFlag(text, '--settings', `'{"database":"agent"}'`);
  const checked = agentSettings.safeParse(settings);
  if (!checked.success) {
    const issues = checked.error.issues.map((i) => ({ path: ['settings', ...i.path], message: i.message }));
    throw new UsageError(`--settings is not valid: ${describeIssues(issues)}`);
  }
  return settings;
}
