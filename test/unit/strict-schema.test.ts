import { describe, expect, it } from 'vitest';
import { dbToolContracts } from '../../src/contracts/db-tools.ts';
import { absentNulls, strictInputSchema } from '../../src/contracts/strict-schema.ts';
import { toolContracts } from '../../src/contracts/tools.ts';

// OpenAI strict function calling (Structured Outputs, "Supported schemas"): the root is an
// object, not anyOf; every object has additionalProperties: false and lists every property in
// required (an optional one is nullable instead); keywords it does not take are absent; at most
// 100 properties and 5 levels of nesting (the documented limits at the time of writing).

type Json = Record<string, unknown>;
const REFUSED = [
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
  'patternProperties',
  'unevaluatedProperties',
  'propertyNames',
  'minProperties',
  'maxProperties',
  'unevaluatedItems',
  'contains',
  'minContains',
  'maxContains',
];

/** Every way `schema` breaks OpenAI's strict-mode rules (empty: it is accepted). */
function strictViolations(schema: Json): string[] {
  const problems: string[] = [];
  if (schema.type !== 'object') problems.push('root: not type object');
  if ('anyOf' in schema) problems.push('root: anyOf');
  let properties = 0;
  const visit = (node: unknown, where: string, depth: number) => {
    if (Array.isArray(node)) {
      for (const [i, n] of node.entries()) visit(n, `${where}[${i}]`, depth);
      return;
    }
    if (!node || typeof node !== 'object') return;
    const n = node as Json;
    for (const k of REFUSED) if (k in n) problems.push(`${where}: ${k}`);
    if (!('type' in n) && !('anyOf' in n) && !('enum' in n) && !('const' in n) && !('$ref' in n)) problems.push(`${where}: no type`);
    if (n.type === 'object') {
      if (depth > 5) problems.push(`${where}: nested deeper than 5`);
      if (n.additionalProperties !== false) problems.push(`${where}: additionalProperties is not false`);
      const props = Object.keys((n.properties as Json | undefined) ?? {});
      properties += props.length;
      const required = new Set((n.required as string[] | undefined) ?? []);
      for (const p of props) if (!required.has(p)) problems.push(`${where}.${p}: not in required`);
      for (const p of props) visit((n.properties as Json)[p], `${where}.${p}`, depth + 1);
    }
    for (const k of ['items', 'anyOf', '$defs', 'definitions']) if (k in n) visit(n[k], `${where}/${k}`, depth);
  };
  visit(schema, '$', 1);
  if (properties > 100) problems.push(`${properties} properties`);
  return problems;
}

const contracts = [...toolContracts(), ...dbToolContracts({ mode: 'write', schemaMode: 'write' })];

describe('strictInputSchema', () => {
  it.each(contracts.map((c) => [c.name, c.inputSchema] as const))('%s: the strict variant passes every OpenAI strict-mode rule', (_name, schema) => {
    expect(strictViolations(strictInputSchema(schema))).toEqual([]);
  });

  it("agentdb's own schemas break them (optional properties, lengths, defaults): the check bites", () => {
    const query = toolContracts().find((c) => c.name === 'DATA_QUERY_SQL')!.inputSchema;
    expect(strictViolations(query)).toEqual(
      expect.arrayContaining(['$.sql: minLength', '$.sql: maxLength', '$.params: not in required', '$.max_rows: default', '$.max_rows: not in required']),
    );
  });

  it('keeps what a model reads: descriptions, enums, the param types; optional becomes nullable', () => {
    const strict = strictInputSchema(toolContracts().find((c) => c.name === 'DATA_QUERY_SQL')!.inputSchema) as {
      properties: Record<string, Json>;
      required: string[];
    };
    expect(strict.required.sort()).toEqual(['agent', 'as_of', 'max_rows', 'params', 'scope', 'sql']);
    expect(strict.properties.as_of).toMatchObject({ anyOf: [{ type: 'string' }, { type: 'null' }], description: expect.stringContaining('as it was') });
    expect(strict.properties.sql).toMatchObject({ type: 'string', description: expect.stringContaining('One SQLite statement') });
    expect(strict.properties.scope).toMatchObject({
      anyOf: [{ type: 'string', enum: ['agent', 'workspace'] }, { type: 'null' }],
      description: expect.any(String),
    });
    expect(strict.properties.max_rows).toMatchObject({ anyOf: [{ type: 'integer' }, { type: 'null' }] });
    expect(JSON.stringify(strict.properties.params)).toContain('"boolean"');
  });
});

describe('absentNulls', () => {
  it('leaves out nulls of optional arguments only, and returns the same object when there are none', () => {
    const schema = { type: 'object', properties: { sql: {}, params: {}, scope: {} }, required: ['sql'] };
    expect(absentNulls({ sql: 'SELECT 1', params: null, scope: null }, schema)).toEqual({ sql: 'SELECT 1' });
    expect(absentNulls({ sql: null, params: [1] }, schema)).toEqual({ sql: null, params: [1] });
    const args = { sql: 'SELECT 1' };
    expect(absentNulls(args, schema)).toBe(args);
  });
});
