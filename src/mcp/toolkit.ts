import { dbToolContracts } from '../contracts/db-tools.ts';
import { toolContracts, type Tier } from '../contracts/tools.ts';
import { toolOutputSchema } from '../contracts/tool-output.ts';
import type { Principal } from '../registry/principal.ts';

/** Where an MCP client connected: the workspace endpoint, or a team endpoint (`/mcp/t/<team>`). */
export type McpEndpoint = { kind: 'workspace' } | { kind: 'team'; team: string };

/** MCP's hints about a tool's effect, from its tier. */
export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** One tool as `tools/list` shows it. */
export interface McpTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** What `structuredContent` holds in every outcome (src/contracts/tool-output.ts). */
  outputSchema: Record<string, unknown>;
  annotations: ToolAnnotations;
}

/**
 * The hints of each tier. A read changes nothing; a write may destroy (a DELETE, an UPDATE, a
 * REPLACE or an ALTER is not additive, which is what `destructiveHint: false` would promise), and
 * the same INSERT twice adds twice: not idempotent; a drop destroys, and a second drop of the
 * same name has no further effect (idempotent).
 */
export function annotationsFor(tier: Tier): ToolAnnotations {
  switch (tier) {
    case 'read':
      return { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
    case 'write':
      return { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false };
    case 'destructive':
      return { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };
  }
}

/**
 * The tools an MCP client sees: the data toolkit, with the same JSON Schemas as
 * `agentdb tools --json`, on the workspace endpoint. Team endpoints do not list it (a team
 * endpoint narrows what a client reaches, and one database per workspace cannot be narrowed),
 * nor does an agent whose database is off (it has no tools at all). An agent registered with
 * the db surface sees db_query, db_schema and (in a write mode) db_exec instead.
 */
export function toolsFor(principal: Principal, endpoint: McpEndpoint): readonly McpTool[] {
  if (endpoint.kind === 'team') return [];
  if (principal.kind === 'agent' && principal.settings.database === 'off') return [];
  if (principal.kind === 'agent' && principal.surface.kind === 'db') {
    const { mode, schemaMode } = principal.surface;
    return listed(`db:${mode}:${schemaMode}`, () =>
      dbToolContracts({ mode, schemaMode }).map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
        outputSchema: toolOutputSchema(undefined),
        annotations: annotationsFor(t.tier),
      })),
    );
  }
  return listed('data', () =>
    toolContracts().map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      outputSchema: toolOutputSchema(t.name),
      annotations: annotationsFor(t.tier),
    })),
  );
}

/**
 * Every list above, built once per process: a list depends only on the surface, and turning
 * the zod schemas into JSON Schemas took about a millisecond, on every `/mcp` request (the
 * endpoint is stateless, so each request builds its server anew). Frozen, since every
 * request shares them.
 */
const lists = new Map<string, readonly McpTool[]>();
function listed(key: string, build: () => McpTool[]): readonly McpTool[] {
  let tools = lists.get(key);
  if (!tools) {
    tools = deepFreeze(build());
    lists.set(key, tools);
  }
  return tools;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
