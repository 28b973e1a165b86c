import type { Command } from 'commander';
import type { Run } from './command-run.ts';

/** `history`, `activity` and `restore`: a database's restorable history, what was done, and going back. */
export function addHistoryCommands(program: Command, run: Run): void {
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
  agentdb restore acme/scout --before <position>     # undo an entry and everything after it
  agentdb restore acme/scout --through <position>    # keep an entry, undo everything after it`,
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
      'print the answer as JSON (the undo command on stderr) instead of lines for a person; with --dry-run: the plan; with --all or --workspace: a JSON line per database, then the total',
    )
    .option(
      '--through <position>',
      'instead of --at, a position `agentdb activity` or `agentdb history` lists: keeps that commit and every one before it (the state just after it)',
    )
    .option(
      '--before <position>',
      'instead of --at, a position `agentdb activity` or `agentdb history` lists: undoes that commit and every one after it (the state just before it)',
    )
    .option('--undo <id>', 'go back to the state before the restore that printed this undo id')
    .option('--into <db>', 'with --at, --through, --before or --from-blob: create this new database of the same workspace instead of restoring in place')
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
  agentdb restore acme/scout --before <position>     # undo that commit and every later one (an undo point keeps them)
  agentdb restore acme/scout --through <position> --into acme/scout-fork   # a fork just after that commit
  agentdb restore acme/scout --undo u…
  agentdb restore acme/scout --at 2026-12-01T01:59:00Z --into acme/scout-before
  agentdb restore acme/scout --from-blob --at 2026-12-01T01:59:00Z   # disaster restore
  agentdb restore acme/scout --from-blob --into acme/scout-backup    # a backup beside the live database
  agentdb restore --from-blob --all                                  # every database missing here`,
    )
    .action(run(async () => (await import('./history.ts')).restore));
}
