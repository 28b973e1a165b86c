/**
 * Keywords OpenAI's strict function calling (Structured Outputs) refuses or ignores. The
 * limits stay enforced by agentdb's own validation (the zod schemas); each tool's description
 * states the ones an agent needs.
 */
const UNSUPPORTED = new Set([
  'default',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
  'uniqueItems',
  'contains',
  'minContains',
  'maxContains',
  'minProperties',
  'maxProperties',
  'patternProperties',
  'propertyNames',
  'unevaluatedItems',
  'unevaluatedProperties',
  '$schema',
]);

type Json = Record<string, unknown>;

/**
 * A tool's input JSON Schema as OpenAI strict mode takes it: every object lists all its
 * properties in `required` and has `additionalProperties: false`; a property that was optional
 * becomes nullable (`anyOf` with `{ type: "null" }`), null standing for "absent" (see
 * {@link absentNulls}); keywords strict mode does not take are left out.
 */
export function strictInputSchema(schema: Json): Json {
  return strictNode(schema) as Json;
}

function strictNode(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(strictNode);
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (UNSUPPORTED.has(k)) continue;
    out[k] = k === 'properties' ? v : strictNode(v);
  }
  if (out.type !== 'object' || !out.properties) return out;
  const props = out.properties as Record<string, unknown>;
  const required = new Set((out.required as string[] | undefined) ?? []);
  out.properties = Object.fromEntries(
    Object.entries(props).map(([name, s]) => {
      const strict = strictNode(s) as Json;
      return [name, required.has(name) ? strict : nullable(strict)];
    }),
  );
  out.required = Object.keys(props);
  out.additionalProperties = false;
  return out;
}

/** `schema` or null; a description stays on the outside, where a model reads it. */
function nullable(schema: Json): Json {
  const { description, ...rest } = schema;
  return { anyOf: [rest, { type: 'null' }], ...(description !== undefined ? { description } : {}) };
}

/**
 * Arguments with the top-level properties that are null and not required by `schema` (the
 * tool's own input schema) left out: a client following {@link strictInputSchema} sends null
 * for an argument it means to leave out.
 */
export function absentNulls(args: Record<string, unknown>, schema: Json): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  // Every MCP tools/call goes through here and almost none sends a null: nothing is allocated
  // (no entries array, no set of the required names) until one is met.
  for (const k in args) {
    if (args[k] !== null || !Object.hasOwn(args, k) || (schema.required as string[] | undefined)?.includes(k)) continue;
    out ??= { ...args };
    delete out[k];
  }
  return out ?? args;
}
