import { z } from 'zod';
import type { Surface } from './agent-profile.ts';
import type { Tier } from './tools.ts';
import { asOfField } from './as-of.ts';

type DbSurface = Extract<Surface, { kind: 'db' }>;

/**
 * Input schemas of the db_* compatibility tools, as db-capability.md gives them (no
 * descriptions on its fields), so an agent written for that surface sees the contract it was
 * written for; db_query adds one optional field of agentdb's, `as_of` (issue 29), which such an
 * agent never sends.
 */
export const dbToolInputs = {
  db_query: z.strictObject({ statement: z.string(), as_of: asOfField.optional() }),
  db_schema: z.strictObject({}),
  db_exec: z.strictObject({ statement: z.string(), rationale: z.string() }),
} as const;

/** The name of one db_* tool. */
export type DbToolName = keyof typeof dbToolInputs;

/** Tier of each db_* tool (a DROP through db_exec is run as a drop: destructive). */
export const DB_TOOL_TIERS = { db_query: 'read', db_schema: 'read', db_exec: 'write' } as const satisfies Record<DbToolName, Tier>;

const descriptions: Record<DbToolName, string> = {
  db_query: 'Run one read-only SQL query against the configured database.',
  db_schema: 'Describe the configured database schema.',
  db_exec: 'Run one SQL mutation against the configured database. Requires rationale; DDL requires schema write mode.',
};

/** One db_* tool as an agent sees it. */
export interface DbToolContract {
  name: DbToolName;
  description: string;
  tier: Tier;
  inputSchema: Record<string, unknown>;
}

/**
 * The db_* tools a surface shows: db_query and db_schema always, db_exec only when `mode` or
 * `schemaMode` is "write" (db-capability.md).
 */
export function dbToolContracts(surface: Pick<DbSurface, 'mode' | 'schemaMode'>): DbToolContract[] {
  const names: DbToolName[] = surface.mode === 'write' || surface.schemaMode === 'write' ? ['db_exec', 'db_query', 'db_schema'] : ['db_query', 'db_schema'];
  return names.map((name) => {
    const { $schema: _ignored, ...inputSchema } = z.toJSONSchema(dbToolInputs[name], { io: 'input' }) as Record<string, unknown>;
    return { name, description: descriptions[name], tier: DB_TOOL_TIERS[name], inputSchema };
  });
}

/** True when `name` is one of the db_* tools. */
export function isDbToolName(name: unknown): name is DbToolName {
  return typeof name === 'string' && Object.hasOwn(dbToolInputs, name);
}
