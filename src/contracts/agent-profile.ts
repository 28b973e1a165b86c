import { z } from 'zod';
import { agentSettings } from './settings.ts';

/**
 * The db_* compatibility surface's options (db-capability.md): `mode` lets `db_exec` mutate
 * data, `schemaMode` lets it run DDL, `policy` decides what happens to an allowed `db_exec`.
 */
export const dbSurface = z.strictObject({
  kind: z.literal('db'),
  mode: z.enum(['read', 'write']).default('read'),
  schemaMode: z.enum(['read', 'write']).default('read'),
  policy: z.enum(['allow', 'require-approval', 'deny', 'retryable-failure']).default('allow'),
});

/** Which tools a registered agent sees: the four DATA_* tools (default), or db_*. */
export const surface = z.discriminatedUnion('kind', [z.strictObject({ kind: z.literal('data') }), dbSurface]);
export type Surface = z.output<typeof surface>;

/**
 * A registered agent: how people know it and the settings its key calls with. The settings
 * are the same ones a runtime passes on a call; registered, they apply to calls made with
 * the agent's key, so nobody holding the key can choose them.
 */
export const agentProfile = z.strictObject({
  displayName: z.string().min(1).max(200),
  settings: agentSettings,
  surface: surface.prefault({ kind: 'data' }),
});
export type AgentProfile = z.output<typeof agentProfile>;
export type AgentProfileInput = z.input<typeof agentProfile>;
