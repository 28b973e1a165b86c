import type { Command } from 'commander';
import type { Run } from './command-run.ts';

/** `start`, `worker` and `scheduler`: the service's processes, all in one or each on its own. */
export function addServiceCommands(program: Command, run: Run): void {
  program
    .command('start')
    .summary('HTTP API, shard workers and scheduler in one process')
    .description('HTTP API, every shard worker and the scheduler in one process (what `npm start` runs)')
    .option('--http-only', 'the HTTP API and the scheduler only: `agentdb worker` processes own the shards (as START_WORKERS=off)')
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
}

/** `doctor`, `executors` and `mcp`: checking the host, the executor children it runs, and MCP over stdio. */
export function addHostCommands(program: Command, run: Run): void {
  program
    .command('doctor')
    .summary('check Redis, the data folder, the blob store, Node and the clock')
    .description(
      "check what agentdb needs: Redis persistence (AOF), maxmemory with noeviction and headroom under it, the clock against Redis's, free disk and ownership of the data folder, the blob store (write, read back, delete), the Node version; each with what to change",
    )
    .option('--json', 'print JSON')
    .option('--dev', 'a development machine: a Redis without persistence (durability) is a warning, not a failure')
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
}
