import { z } from 'zod';

/** The plans that set table-count and size limits. */
export const PLANS = ['pro', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

/**
 * An agent's own settings, carried on every call by the runtime that enqueues it. An absent
 * `database` means off: the agent has no database tools at all.
 */
export const agentSettings = z.strictObject({
  database: z.enum(['off', 'agent', 'workspace']).default('off'),
  approval: z.enum(['never', 'write']).default('never'),
  sandbox: z.boolean().default(false),
  /** The shared-data grant: write the workspace tables, read other agents' tables. */
  sharedData: z.boolean().default(false),
  plan: z.enum(PLANS).default('pro'),
});

/** Parsed agent settings. */
export type AgentSettings = z.output<typeof agentSettings>;
export type AgentSettingsInput = z.input<typeof agentSettings>;
