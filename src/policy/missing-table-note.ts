import type { Caller, Target, TargetArgs } from './access.ts';

/**
 * What to add to SQLite's `no such table: T` when the table is likely elsewhere than the call
 * looked: an agent with `database: "workspace"` reaches its own tables unless it says
 * `"scope":"workspace"`, and a member's calls reach the shared tables unless they name an agent.
 * Both answered the registry's hint alone ("DATA_DESCRIBE_SCHEMA shows what exists"), which
 * lists the tables of the database the call looked in, not where the table is (review N10; a new
 * user's second agent meets it at once: docs/calls.md "Two agents, one shared table"). Static:
 * the other database is on another shard, so it is not looked in.
 * @returns the sentence to add, or undefined when there is nowhere else to look.
 */
export function missingTableNote(caller: Caller, args: TargetArgs, target: Target, detail: string): string | undefined {
  if (!/^no such table: /i.test(detail)) return undefined;
  if (caller.kind === 'agent') {
    // Its own database, reached by default; only `database: "workspace"` may look elsewhere.
    if (caller.settings.database !== 'workspace' || target.agent !== caller.agent || args.scope === 'agent') return undefined;
    return `It is not among ${caller.agent}'s own tables, where a call without "scope" looks; a table of the workspace's shared database takes "scope":"workspace", another agent's "agent":"<name>" (with the shared-data grant)`;
  }
  if (target.agent !== undefined) return undefined;
  return `It is not among the workspace's shared tables, where a member's call without "agent" looks; an agent's own table takes "agent":"<name>"`;
}
