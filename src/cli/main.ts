import { ConfigError, loadConfig, type Config } from '../config.ts';

/** What every command gets: the configuration, and its own arguments. */
export interface CommandContext {
  config: Config;
  argv: string[];
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

type Command = (ctx: CommandContext) => Promise<number>;

const commands: Record<string, () => Promise<Command>> = {
  start: async () => (await import('./start.ts')).start,
  worker: async () => (await import('./worker.ts')).worker,
  scheduler: async () => (await import('./scheduler.ts')).scheduler,
  call: async () => (await import('./call.ts')).call,
  tools: async () => (await import('./tools.ts')).tools,
  usage: async () => (await import('./usage.ts')).usage,
  members: async () => (await import('./members.ts')).members,
  approvals: async () => (await import('./approvals.ts')).approvals,
  result: async () => (await import('./result.ts')).result,
  executors: async () => (await import('./executors.ts')).executors,
};

const USAGE = `usage: agentdb <command> [options]

  start                         HTTP API, every shard worker and the scheduler
  worker [--shards 0-7]         shard workers only
  scheduler [--prune-now]       the scheduled jobs only (nightly prune of Redis past retention)
  call --workspace W --agent A [--settings JSON] [--no-wait] [--timeout S] TOOL ARGS_JSON
  call --batch FILE|- [--no-wait] [--timeout S]
  result CALL_ID [--wait]       a call's envelope, or where it stands (queued, running, awaiting approval)
  tools [--json]                the agent-visible tool contract
  usage --workspace W [--json]  credits metered per agent, tool and day
  members add --workspace W --name NAME [--role member|admin] [--json]
                                register a person who decides approvals; prints their key once
  members revoke --workspace W --name NAME
  members list --workspace W [--json]
  approvals list [--workspace W] [--state pending|all] [--limit N] [--json]
  approvals approve|reject ID --by MEMBER [--reason R]
  executors [--json]            what each executor child of each worker runs now, and for how long
`;

/**
 * The `agentdb` entry point: loads the configuration once and runs one command.
 * @returns the process exit code.
 */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (!name || !commands[name]) {
    // No command, or one that does not exist, is a mistake a script must notice.
    process.stderr.write(USAGE);
    return 2;
  }
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agentdb: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const command = await commands[name]!();
  return command({ config, argv: rest, stdout: process.stdout, stderr: process.stderr });
}
