import { type Command, Option } from 'commander';
import { type Run, seconds } from './command-run.ts';

/** `call` and `result`: making tool calls, and asking for one's outcome later. */
export function addCallCommands(program: Command, run: Run): void {
  program
    .command('call')
    .summary('make a tool call, or a batch of them')
    .description('make one tool call (TOOL ARGS_JSON) or a batch of them; prints one JSON envelope per call')
    .argument('[tool]', 'DATA_DESCRIBE_SCHEMA, DATA_QUERY_SQL, DATA_WRITE_SQL or DATA_DROP_TABLE')
    .argument('[args_json]', "the tool's arguments as one JSON object (default {})")
    .option('--workspace <name>', 'the workspace the call belongs to (required without --batch)')
    .option('--agent <name>', 'the agent making the call (required without --batch)')
    .option('--settings <json>', 'the agent\'s settings, e.g. \'{"database":"agent"}\' (default: database off, no tools)')
    .option('--call-id <id>', "your own id for the call: sent again, the same call answers the first one's outcome; another call under it IDEMPOTENCY_CONFLICT")
    .option('--no-wait', 'answer once the call ran or was parked for a person, or say it is queued')
    .option('--timeout <seconds>', 'how long a worker may take to pick the call up', seconds, 30)
    .option('--batch <file>', 'read calls from FILE (or - for stdin), one JSON object per line')
    .addHelpText(
      'after',
      `
Examples:
  agentdb call --workspace acme --agent scout --settings '{"database":"agent"}' \\
    DATA_WRITE_SQL '{"sql":"CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE)"}'
  agentdb call --batch calls.jsonl   # {"workspace","agent","settings","tool","arguments","callId"?} per line

Exit 0 when every call succeeded (or, with --no-wait, is on its way or waits for a person),
1 when one failed, 2 for a bad command line (nothing was called).`,
    )
    .action(run(async () => (await import('./call.ts')).call));
  program
    .command('result')
    .summary("a call's envelope, or where it stands")
    .description("a call's envelope, or where it stands (queued, running, awaiting approval)")
    .argument('<call_id>', 'the callId of an envelope or of a --no-wait answer')
    .requiredOption('--workspace <name>', 'the workspace that made the call (a call id belongs to its caller)')
    .requiredOption('--agent <name>', "the agent that made the call (@<member> for a member's own calls)")
    .option('--wait', 'wait until the call has finished, however long a person takes')
    .action(run(async () => (await import('./result.ts')).result));
}

/** `result-blob`, `tools` and `usage`: an offloaded result whole, the tools' contract, and what calls were metered. */
export function addCallOutputCommands(program: Command, run: Run): void {
  program
    .command('result-blob')
    .summary('a query result too large for its envelope, whole')
    .description('a DATA_QUERY_SQL result offloaded to the blob store (result.offloaded.id), as JSON {"columns":[…],"rows":[…]}')
    .argument('<id>', 'result.offloaded.id of the envelope')
    .requiredOption('--workspace <name>', 'the workspace whose result it is')
    .option('--agent <name>', "find it only among this agent's own results (as its key would)")
    .option('--out <file>', 'write it to this file instead of stdout')
    .action(run(async () => (await import('./result-blob.ts')).resultBlob));
  program
    .command('tools')
    .description('the agent-visible contract of the four tools (or, with --surface db, of db_query, db_schema, db_exec)')
    .option('--json', 'print the JSON Schemas')
    .addOption(new Option('--surface <surface>', 'which tool surface').choices(['data', 'db']).default('data'))
    .addOption(new Option('--mode <mode>', 'with --surface db: data changes allowed').choices(['read', 'write']))
    .addOption(new Option('--schema-mode <mode>', 'with --surface db: DDL allowed').choices(['read', 'write']))
    .action(run(async () => (await import('./tools.ts')).tools, { config: false }));
  program
    .command('usage')
    .description('credits metered per agent, tool and day; databases and disk bytes against the plan')
    .requiredOption('--workspace <name>', 'the workspace')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./usage.ts')).usage));
}
