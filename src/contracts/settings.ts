import { z } from 'zod';

/** The plans that set table-count and size limits. */
export const PLANS = ['pro', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

/**
 * The plan of a workspace nobody registered (`agentdb workspaces set`): the smallest, so that
 * no caller gets larger limits by leaving its workspace out of the registry.
 */
export const UNREGISTERED_PLAN: Plan = 'pro';

/**
 * An agent's own settings, carried on every call by the runtime that enqueues it (or, for a
 * registered agent calling with its key, read from the registry). An absent `database` means
 * off: the agent has no database tools at all. There is no plan here: limits follow the
 * workspace's registered plan, which an agent must not be able to pick for itself.
 */
export const agentSettings = z.strictObject({
  /** `agent`: its own database; `workspace`: the workspace's shared one; `off` (the default): no database tools at all. */
  database: z.enum(['off', 'agent', 'workspace']).default('off'),
  /** `write`: every write waits for a person to approve it; `never` (the default): writes run at once. A drop waits whatever this says. */
  approval: z.enum(['never', 'write']).default('never'),
  /** A sandbox run, where nothing can wait for a person: a drop is refused (SANDBOX_REFUSED) rather than parked. */
  sandbox: z.boolean().default(false),
  /** The shared-data grant: write the workspace tables, read other agents' tables. */
  sharedData: z.boolean().default(false),
});

/** Parsed agent settings. */
export type AgentSettings = z.output<typeof agentSettings>;
/** Agent settings as a caller gives them (the package exports it as `AgentSettings`): every field optional, defaults filled in by the parse. */
export type AgentSettingsInput = z.input<typeof agentSettings>;
