// The `agentdb` command line: one table of declarations, split by command group (each group's
// file holds its commands, flags and help), called here in the order `agentdb --help` lists them.
// No command's code lives in these files: each is imported from its own module when it runs.

import { Command } from 'commander';
import { addApprovalCommands } from './approval-commands.ts';
import { addBackupCommands } from './backup-commands.ts';
import { addCallCommands, addCallOutputCommands } from './call-commands.ts';
import type { Dispatch, Handler, Run } from './command-run.ts';
import { addHistoryCommands } from './history-commands.ts';
import { addRegistryCommands } from './registry-commands.ts';
import { addHostCommands, addServiceCommands } from './service-commands.ts';

/**
 * The `agentdb` command line: every command, its flags and help, with commander parsing them.
 * Only declarations live here; each command's code is imported when it runs, so a command
 * loads what it uses and nothing else (`tools` needs neither Redis nor BullMQ nor zod).
 */
export function buildProgram(version: string, dispatch: Dispatch): Command {
  const program = new Command('agentdb')
    .description('Every AI agent its own SQLite database, every workspace a shared one, through four queued tools.')
    .version(version, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help for a command')
    // The one mapping of cli/exit-status.ts, said where a person writing a script looks first.
    .addHelpText(
      'after',
      '\nExit status, the same for every command (docs/errors.md, "Exit status"):\n' +
        '  0    done (a call on its way or waiting for a person too)\n' +
        '  1    refused or failed: sent again as it is, it fails again (the JSON on stdout has its code)\n' +
        '  2    bad command line or configuration (INVALID_ARGUMENTS, UNKNOWN_TOOL, CONFIG_MISMATCH too): nothing was done\n' +
        '  3    not now: Redis or a worker did not answer, or the code is retryable: try again later\n' +
        '  130  stopped by Ctrl-C\n',
    );
  const run: Run =
    (load: () => Promise<Handler>, needs = { config: true }) =>
    (...args: unknown[]) =>
      dispatch(args.at(-1) as Command, args.slice(0, -2), load, needs);
  // In `agentdb --help`'s order; backup sits between result and result-blob there.
  addServiceCommands(program, run);
  addCallCommands(program, run);
  addBackupCommands(program, run);
  addCallOutputCommands(program, run);
  addRegistryCommands(program, run);
  addHostCommands(program, run);
  addHistoryCommands(program, run);
  addApprovalCommands(program, run);
  return program;
}
