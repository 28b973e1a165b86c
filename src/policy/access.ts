import type { AgentSettings } from '../contracts/settings.ts';
import { TOOL_TIERS, type ToolName } from '../contracts/tools.ts';
import type { ErrorCode } from '../errors.ts';
import { type GrantLevel, levelAllows, scopeOfLevel } from '../contracts/grant-scope.ts';

/** Who is calling: an agent through its runtime, or a person's Connect client. */
export type Caller =
  | { kind: 'agent'; workspace: string; agent: string; settings: AgentSettings }
  | { kind: 'member'; workspace: string; member: string; role: 'member' | 'admin'; granted?: GrantLevel };

/** The database a call is about: the shared one (`agent` absent) or one agent's own. */
export interface Target {
  workspace: string;
  agent?: string;
}

/** The verdict on one call: which database it reaches, or why it may not. */
export type AccessVerdict = { ok: true; target: Target } | { ok: false; code: ErrorCode; detail: string };

/** The `scope` and `agent` arguments every tool takes. */
export interface TargetArgs {
  scope?: 'agent' | 'workspace';
  agent?: string;
}

const deny = (code: ErrorCode, detail: string): AccessVerdict => ({ ok: false, code, detail });

/**
 * The rules of DESIGN.md "Who may do what", as each refusal names them: an agent or a person
 * told only "not permitted" cannot tell which setting or role to change.
 */
export const RULE = {
  ownTables: 'Rule "an agent\'s own tables are never written or dropped by anyone else"',
  otherNeedsGrant: 'Rule "another agent\'s tables are read only, with the shared-data grant"',
  sharedNeedsWorkspace: 'Rule "the shared tables need database: workspace"',
  sharedWriteNeedsGrant: 'Rule "shared writes and drops need the shared-data grant"',
  clientHasNoDatabase: 'Rule "a client has no database of its own"',
  clientDropTakesAdmin: 'Rule "a drop from a client takes an admin"',
  grantScope: 'Rule "an app signed in with OAuth does only what the person granted it"',
} as const;

/**
 * Decides which database a call reaches and whether the caller may use the tool on it
 * (DESIGN.md "Who may do what"). Two rules carry the weight: an agent's own tables are only
 * ever written or dropped by that agent, and shared writes need the shared-data grant (agents)
 * or membership (people), shared drops an admin (people).
 */
export function resolveAccess(caller: Caller, tool: ToolName, args: TargetArgs): AccessVerdict {
  const tier = TOOL_TIERS[tool];
  const other = args.agent !== undefined && !(caller.kind === 'agent' && args.agent === caller.agent);
  if (other && args.scope === 'workspace') {
    return deny('INVALID_ARGUMENTS', 'Give scope "workspace" or agent, not both.');
  }
  if (caller.kind === 'agent') return agentAccess(caller, tier, args, other);
  return memberAccess(caller, tier, args, other);
}

function agentAccess(caller: Extract<Caller, { kind: 'agent' }>, tier: (typeof TOOL_TIERS)[ToolName], args: TargetArgs, other: boolean): AccessVerdict {
  const { database, sharedData } = caller.settings;
  if (database === 'off')
    return deny(
      'DATABASE_OFF',
      'Its settings.database is "off", the default when the settings name none (a call made without an agent key runs with the settings it passes, not the agent\'s registered ones).',
    );
  if (other) {
    if (database !== 'workspace' || !sharedData) {
      return deny('NOT_PERMITTED', `${RULE.otherNeedsGrant}: reading agent "${args.agent}"'s tables needs the shared-data grant.`);
    }
    if (tier !== 'read') {
      return deny('NOT_PERMITTED', `${RULE.ownTables}: agent "${args.agent}"'s tables are its own to write; you may only read them.`);
    }
    return { ok: true, target: { workspace: caller.workspace, agent: args.agent } };
  }
  if (args.scope === 'workspace') {
    if (database !== 'workspace') {
      return deny('NOT_PERMITTED', `${RULE.sharedNeedsWorkspace}: this agent has only its own tables (settings.database is "agent").`);
    }
    if (tier !== 'read' && !sharedData) {
      return deny('NOT_PERMITTED', `${RULE.sharedWriteNeedsGrant}: writing or dropping the shared workspace tables needs the shared-data grant.`);
    }
    return { ok: true, target: { workspace: caller.workspace } };
  }
  return { ok: true, target: { workspace: caller.workspace, agent: caller.agent } };
}

function memberAccess(caller: Extract<Caller, { kind: 'member' }>, tier: (typeof TOOL_TIERS)[ToolName], args: TargetArgs, other: boolean): AccessVerdict {
  if (args.scope === 'agent' && !other) {
    return deny('NOT_PERMITTED', `${RULE.clientHasNoDatabase}: use scope "workspace" or name an agent to read its tables.`);
  }
  if (other) {
    if (tier !== 'read') {
      return deny('NOT_PERMITTED', `${RULE.ownTables}: agent "${args.agent}"'s tables are its own to write; a client may only read them.`);
    }
    return { ok: true, target: { workspace: caller.workspace, agent: args.agent } };
  }
  if (tier === 'destructive' && caller.role !== 'admin') {
    return deny('NOT_PERMITTED', `${RULE.clientDropTakesAdmin}: dropping a shared table takes a workspace admin.`);
  }
  // Within the role, what the person granted an OAuth client (reads of other agents' tables,
  // above, are within every grant).
  if (caller.granted && !levelAllows(caller.granted, tier)) {
    const needs = tier === 'destructive' ? 'drop' : tier;
    return deny('INSUFFICIENT_SCOPE', `${RULE.grantScope}: this app was granted "${scopeOfLevel(caller.granted)}"; this call needs "${needs}".`);
  }
  return { ok: true, target: { workspace: caller.workspace } };
}
