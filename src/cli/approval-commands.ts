import { type Command, Option } from 'commander';
import { type Run, count } from './command-run.ts';

/** `--state`'s choices: an approval's states, and `all` for the decision audit. */
const STATES = ['pending', 'approved', 'rejected', 'expired', 'superseded', 'all'];

/** `approvals list`, `show`, `approve` and `reject`: calls waiting for a person, and the decision audit. */
export function addApprovalCommands(program: Command, run: Run): void {
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
}
