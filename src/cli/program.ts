// One file on purpose, past 300 lines: the command line is one table of declarations (every
// command, its flags and help, in the order `agentdb --help` lists them) and holds no code of a
// command: each is imported from its own module when it runs. Split by group, the parts would
// share `run` and the flag parsers and still be read as one list (issue 26).

import { Command, InvalidArgumentError, Option } from 'commander';

/**
 * A command's entry as its module exports it: main hands it the context, the parsed flags and
 * the arguments, and exits with what it answers. (`never` parameters: each command names its
 * own flags type, and every such function fits here.)
 */
export type Handler = (ctx: never, flags: never, ...args: never[]) => Promise<number>;

/** How main runs a command once commander has parsed its command line. */
export type Dispatch = (command: Command, args: unknown[], load: () => Promise<Handler>, needs: { config: boolean }) => Promise<void>;

const STATES = ['pending', 'approved', 'rejected', 'expired', 'superseded', 'all'];

/** `--timeout`'s value: seconds above 0. */
function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('It takes a number of seconds above 0.');
  return n;
}

/** `--limit`'s value: a whole number above 0. */
function count(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('It takes a whole number above 0.');
  return n;
}

/**
 * The `agentdb` command line: every command, its flags and help, with commander parsing them.
 * Only declarations live here; each command's code is imported when it runs, so a command
 * loads what it uses and nothing else (`tools` needs neither Redis nor BullMQ nor zod).
 */
export function buildProgram(version: string, dispatch: Dispatch): Command {
  const program = new Command('agentdb')
    .description('Every AI agent its own SQLite database, every workspace a shared one, through four queued tools.')
    .version(version, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help for a command');
  const run =
    (load: () => Promise<Handler>, needs = { config: true }) =>
    (...args: unknown[]) =>
      dispatch(args.at(-1) as Command, args.slice(0, -2), load, needs);

  program
    .command('start')
    .summary('HTTP API, shard workers and scheduler in one process')
    .description('HTTP API, every shard worker and the scheduler in one process (what `npm start` runs)')
    .action(run(async () => (await import('./start.ts')).start));
  program
    .command('worker')
    .summary('shard workers only')
    .description("shard workers only: takes the free shards of its range, and a dead worker's when its lease lapses")
    .option('--shards <list>', 'shards to own, such as 0-7 or 0,3,8-11 (default: all)')
    .action(run(async () => (await import('./worker.ts')).worker));
  program
    .command('scheduler')
    .summary('the scheduled jobs only')
    .description('the scheduled jobs only (the nightly prune of Redis past retention)')
    .option('--prune-now', 'prune once, print what was removed and exit')
    .action(run(async () => (await import('./scheduler.ts')).scheduler));

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
  const backup = program
    .command('backup')
    .summary("blob backups of every database's history")
    .description("blob backups of every database's history (nightly on BACKUP_CRON)");
  backup
    .command('now')
    .description(
      "back up now, on each shard's owner: a fresh snapshot and the closed history segments each database lacks in the blob store, each verified by reading it back",
    )
    .option('--db <db>', 'only this database: <workspace> or <workspace>/<agent>')
    .action(run(async () => (await import('./backup.ts')).backupNow));
  program
    .command('backups')
    .summary("the backup schedule, each shard's last run, what the blob store holds")
    .description(
      "the backup schedule and its next run, each shard's last backup run and its outcome, and what the blob store holds per database (objects, size, age); exit 1 when a shard's last run failed",
    )
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./backups.ts')).backups));
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

  const members = program.command('members').description("the people who decide a workspace's approvals");
  members
    .command('add')
    .summary('register a person; prints their key once')
    .description('register a person; prints their key once (it is kept only as a hash)')
    .requiredOption('--workspace <name>', 'the workspace')
    .requiredOption('--name <name>', "the person's name: a-z, 0-9, _ and -")
    .addOption(new Option('--role <role>', 'what they may decide').choices(['member', 'admin']).default('member'))
    .option('--save-key <path>', 'write the key alone to this new file (mode 600) instead of printing it: what --key-file reads')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./members.ts')).add));
  members
    .command('revoke')
    .description('revoke a person: their key stops working')
    .requiredOption('--workspace <name>', 'the workspace')
    .requiredOption('--name <name>', "the person's name")
    .action(run(async () => (await import('./members.ts')).revoke));
  members
    .command('list')
    .description('the members of a workspace, revoked ones included')
    .requiredOption('--workspace <name>', 'the workspace')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./members.ts')).list));

  const workspaces = program.command('workspaces').description("registered workspaces; a registered workspace's plan sets its limits");
  workspaces
    .command('set')
    .description('register a workspace, or change its plan')
    .requiredOption('--workspace <name>', 'the workspace')
    .addOption(new Option('--plan <plan>', 'its plan (table and size limits)').choices(['pro', 'business', 'enterprise']).makeOptionMandatory())
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./workspaces.ts')).set));
  workspaces
    .command('list')
    .description('the registered workspaces')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./workspaces.ts')).list));
  workspaces
    .command('remove')
    .description('unregister a workspace (it runs on the smallest plan again)')
    .requiredOption('--workspace <name>', 'the workspace')
    .action(run(async () => (await import('./workspaces.ts')).remove));

  const agents = program.command('agents').description('registered agents: their settings and tool surface, used when they call with their key');
  agents
    .command('set')
    .description('register an agent, or replace its profile (flags left out take their defaults)')
    .requiredOption('--workspace <name>', 'the workspace')
    .requiredOption('--agent <slug>', "the agent's slug")
    .option('--name <text>', 'its display name')
    .addOption(new Option('--database <database>', 'its database').choices(['off', 'agent', 'workspace']))
    .addOption(new Option('--approval <approval>', 'which calls wait for a person').choices(['never', 'write']))
    .option('--sandbox', 'a sandbox run: drops are refused')
    .option('--shared-data', "the grant to write shared tables and read other agents'")
    .addOption(new Option('--surface <surface>', 'its tool surface').choices(['data', 'db']).default('data'))
    .addOption(new Option('--mode <mode>', 'with --surface db').choices(['read', 'write']))
    .addOption(new Option('--schema-mode <mode>', 'with --surface db').choices(['read', 'write']))
    .addOption(new Option('--policy <policy>', 'with --surface db').choices(['allow', 'require-approval', 'deny', 'retryable-failure']))
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./agents.ts')).set));
  agents
    .command('list')
    .description('the registered agents of a workspace')
    .requiredOption('--workspace <name>', 'the workspace')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./agents.ts')).list));
  agents
    .command('remove')
    .description('unregister an agent: its keys stop working; its database is kept')
    .requiredOption('--workspace <name>', 'the workspace')
    .requiredOption('--agent <slug>', "the agent's slug")
    .action(run(async () => (await import('./agents.ts')).remove));

  const keys = program.command('keys').description('agent keys (member keys come from `members add`)');
  keys
    .command('mint')
    .description('an agent key, printed once (kept only as a hash)')
    .requiredOption('--workspace <name>', 'the workspace')
    .requiredOption('--agent <slug>', 'the registered agent')
    .option('--save-key <path>', 'write the key alone to this new file (mode 600) instead of printing it: what --key-file reads')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./keys.ts')).mint));
  keys
    .command('revoke')
    .description('revoke an agent key: it stops working at once')
    .requiredOption('--workspace <name>', 'the workspace')
    .requiredOption('--id <key_id>', "the key's id, as `keys list` shows it")
    .action(run(async () => (await import('./keys.ts')).revoke));
  keys
    .command('list')
    .description('the agent keys of a workspace, revoked ones included')
    .requiredOption('--workspace <name>', 'the workspace')
    .option('--agent <slug>', "only this agent's")
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./keys.ts')).list));

  program
    .command('doctor')
    .summary('check Redis, the data folder, the blob store, Node and the clock')
    .description(
      "check what agentdb needs: Redis persistence (AOF), maxmemory with noeviction and headroom under it, the clock against Redis's, free disk and ownership of the data folder, the blob store (write, read back, delete), the Node version; each with what to change",
    )
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExit 1 when a check fails; warnings alone exit 0.')
    .action(run(async () => (await import('./doctor.ts')).doctor));
  program
    .command('executors')
    .description(
      'what each executor child of each worker runs, for how long, and how many more statements of that database it was sent (behind), as published once a second: a call that just ended may show as running for up to ~1 s more, so check a pid before signalling it',
    )
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./executors.ts')).executors));
  program
    .command('mcp')
    .description('the MCP server of POST /mcp over stdin/stdout, for a local MCP client')
    .option('--stdio', 'serve over stdin/stdout')
    .option('--key-file <path>', 'read the agent or member key from this file (default: AGENTDB_KEY)')
    .option('--key <key>', 'the key itself: visible in ps and shell history, prefer AGENTDB_KEY or --key-file')
    .action(run(async () => (await import('./mcp.ts')).mcp));

  program
    .command('history')
    .summary("a database's restorable history")
    .description(
      "a database's restorable range, its generations (a snapshot and the commits after it), its undo points and its users' last 20 commits, newest first (agentdb's own upkeep left out)",
    )
    .argument('<db>', 'the database: <workspace> (shared) or <workspace>/<agent>')
    .option('--json', 'print JSON')
    .option('--all-commits', "list agentdb's own upkeep commits (exactly-once records' housekeeping, decisions' audit rows) among the last commits too")
    .action(run(async () => (await import('./history.ts')).history));
  program
    .command('activity')
    .summary("a database's history as what was done")
    .description(
      "a database's history as what was done, newest first: each commit as the call that made it (time, agent or member, tool, SQL cut, rationale, approved by, rows changed), a restore, or a write made outside agentdb; with the moment to restore to just before each",
    )
    .argument('<db>', 'the database: <workspace> (shared) or <workspace>/<agent>')
    .option('--json', 'print JSON')
    .option('--limit <n>', 'entries on the page (default 50, at most 200)')
    .option('--before <id>', 'the page after this entry (the line "more:" names it)')
    .addHelpText(
      'after',
      `
Examples:
  agentdb activity acme/scout
  agentdb activity acme --json --limit 20
  agentdb restore acme/scout --at <restore before>   # undo an entry and everything after it`,
    )
    .action(run(async () => (await import('./activity.ts')).activity));
  program
    .command('restore')
    .summary('restore a database to a moment, or undo a restore')
    .description('restore a database in place to a moment (keeping an undo point), into a new database, or back to an undo point (an operator command)')
    .argument('[db]', 'the database: <workspace> (shared) or <workspace>/<agent>')
    .option('--at <time>', 'the moment: ISO time (2026-12-01T02:00:00Z) or unix seconds')
    .option('--all', 'with --from-blob: every database the blob store holds that is missing here (a line each, then a total)')
    .option('--workspace <name>', 'with --from-blob: every database of this workspace the blob store holds that is missing here')
    .option(
      '--json',
      'print the answer as JSON (the undo command on stderr) instead of lines for a person; with --dry-run: the plan; with --all or --workspace: a JSON line per database, then the total (one database --from-blob prints JSON either way)',
    )
    .option(
      '--through <position>',
      "instead of --at, a history position: an activity entry's id (the state just after its commit) or its restore-before (the state just before it)",
    )
    .option('--undo <id>', 'go back to the state before the restore that printed this undo id')
    .option('--into <db>', 'with --at, --through or --from-blob: create this new database of the same workspace instead of restoring in place')
    .option(
      '--dry-run',
      'say where it would go and what it would take away (the activity entries after that moment, newest first; with --into, what the new database leaves out; with --from-blob, the moment and commits alone); change nothing',
    )
    .option('--by <name>', "who restores, for the database's audit (default: your user name)")
    .option(
      '--from-blob',
      "rebuild DB, which must not exist here (a new machine, an empty data folder), from the blob store's backups alone (or, with --into, a new database from DB's backups); --at defaults to the latest backed up",
    )
    .addHelpText(
      'after',
      `
Examples:
  agentdb history acme/scout
  agentdb restore acme/scout --at 2026-12-01T01:59:00Z --dry-run
  agentdb restore acme/scout --at 1796090340          # in place; prints an undo id and the command to undo
  agentdb restore acme/scout --through <activity id> --into acme/scout-fork   # a fork just after that commit
  agentdb restore acme/scout --undo u…
  agentdb restore acme/scout --at 2026-12-01T01:59:00Z --into acme/scout-before
  agentdb restore acme/scout --from-blob --at 2026-12-01T01:59:00Z   # disaster restore
  agentdb restore acme/scout --from-blob --into acme/scout-backup    # a backup beside the live database
  agentdb restore --from-blob --all                                  # every database missing here`,
    )
    .action(run(async () => (await import('./history.ts')).restore));

  const approvals = program.command('approvals').description('calls waiting for a person, and the decision audit');
  approvals
    .command('list')
    .summary('approvals, newest first')
    .description('approvals, newest first (the table shortens SQL, params and rationale; --json has them whole)')
    .option('--workspace <name>', 'only this workspace')
    .addOption(new Option('--state <state>', 'which approvals (all: the decision audit)').choices(STATES).default('pending'))
    .option('--limit <n>', 'at most this many', count, 200)
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./approvals.ts')).list));
  approvals
    .command('show')
    .description("one approval whole, with its call's effect: rows inserted, updated and deleted, before and after")
    .argument('<id>', 'the approval id (ap_…) or the call id of the parked call')
    .option('--json', 'print JSON')
    .action(run(async () => (await import('./approvals.ts')).show));
  for (const decision of ['approve', 'reject'] as const) {
    approvals
      .command(decision)
      .description(`${decision} a parked call${decision === 'reject' ? ' (the agent gets the reason)' : ': it runs now'}`)
      .argument('<id>', 'the approval id (ap_…) or the call id of the parked call')
      .option('--key-file <path>', 'read your member key from this file, - for stdin (default: AGENTDB_MEMBER_KEY)')
      .option('--key <key>', 'your member key itself: visible in ps and shell history, prefer AGENTDB_MEMBER_KEY or --key-file')
      .option('--operator', "decide on a member's behalf without their key (an operator holding the deployment's Redis); needs --by")
      .option('--by <member>', 'with --operator: the member on whose behalf you decide')
      .option('--reason <text>', 'why; kept with the decision')
      .option('--json', 'print the decided approval record as JSON instead of a line')
      .action(run(async () => (await import('./approvals.ts'))[decision]));
  }
  return program;
}
