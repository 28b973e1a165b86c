import type { Command } from 'commander';
import type { Run } from './command-run.ts';

/** `backup now` and `backups`: blob backups of every database's history, and how they stand. */
export function addBackupCommands(program: Command, run: Run): void {
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
}
