import { type Command, Option } from 'commander';
import type { Run } from './command-run.ts';

/** `members`, `workspaces`, `agents` and `keys`: who and what is registered, and the keys they call with. */
export function addRegistryCommands(program: Command, run: Run): void {
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
}
