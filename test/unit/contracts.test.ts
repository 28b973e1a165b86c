import { describe, expect, it } from 'vitest';
import { TOOL_NAMES, toolContracts, toolInputs } from '../../src/contracts/tools.ts';
import { planCall } from '../../src/policy/call-plan.ts';
import { parseShardRange } from '../../src/cli/shard-range.ts';
import { errorBody } from '../../src/errors.ts';

const base = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' } };
const code = (input: unknown) => {
  const r = planCall(input, 16);
  return r.ok ? 'ok' : r.failure.code;
};

describe('tool contracts', () => {
  it('publishes the four tools with JSON Schemas generated from zod', () => {
    const contracts = toolContracts();
    expect(contracts.map((c) => c.name)).toEqual(TOOL_NAMES);
    const query = contracts.find((c) => c.name === 'DATA_QUERY_SQL')!;
    expect(query.inputSchema).toMatchObject({
      type: 'object',
      additionalProperties: false,
      required: ['sql'],
      properties: { max_rows: { default: 100, maximum: 1000 }, params: { maxItems: 100 } },
    });
    expect(contracts.find((c) => c.name === 'DATA_DROP_TABLE')!.tier).toBe('destructive');
  });

  it('defaults max_rows to 100', () => {
    expect(toolInputs.DATA_QUERY_SQL.parse({ sql: 'SELECT 1' }).max_rows).toBe(100);
  });

  it.each<[string, unknown, string]>([
    ['a good query', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', params: [1, 'a', true, null] } }, 'ok'],
    ['an unknown tool', { ...base, tool: 'DATA_NUKE', arguments: {} }, 'UNKNOWN_TOOL'],
    ['a missing sql', { ...base, tool: 'DATA_QUERY_SQL', arguments: {} }, 'INVALID_ARGUMENTS'],
    ['sql of the wrong type', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 42 } }, 'INVALID_ARGUMENTS'],
    ['sql over 100 KB', { ...base, tool: 'DATA_WRITE_SQL', arguments: { sql: `SELECT '${'x'.repeat(102_400)}'` } }, 'INVALID_ARGUMENTS'],
    ['100 KB of multi-byte sql', { ...base, tool: 'DATA_WRITE_SQL', arguments: { sql: 'é'.repeat(60_000) } }, 'INVALID_ARGUMENTS'],
    ['101 params', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', params: Array(101).fill(1) } }, 'INVALID_ARGUMENTS'],
    ['100 params', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', params: Array(100).fill(1) } }, 'ok'],
    ['an object param', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: [{ a: 1 }] } }, 'INVALID_ARGUMENTS'],
    ['an array param', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: [[1]] } }, 'INVALID_ARGUMENTS'],
    ['max_rows 1001', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', max_rows: 1001 } }, 'INVALID_ARGUMENTS'],
    ['max_rows 0', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', max_rows: 0 } }, 'INVALID_ARGUMENTS'],
    ['an unknown argument', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', limit: 3 } }, 'INVALID_ARGUMENTS'],
    ['arguments that are not an object', { ...base, tool: 'DATA_QUERY_SQL', arguments: 'SELECT 1' }, 'INVALID_ARGUMENTS'],
    ['a workspace with ../', { ...base, workspace: '../etc', tool: 'DATA_DESCRIBE_SCHEMA' }, 'INVALID_ARGUMENTS'],
    ['an agent with a slash', { ...base, agent: 'a/b', tool: 'DATA_DESCRIBE_SCHEMA' }, 'INVALID_ARGUMENTS'],
    ['an agent argument with ..', { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1', agent: '..' } }, 'INVALID_ARGUMENTS'],
    ['an upper-case name', { ...base, agent: 'Scout', tool: 'DATA_DESCRIBE_SCHEMA' }, 'INVALID_ARGUMENTS'],
    ['unknown settings', { ...base, settings: { database: 'agent', root: true }, tool: 'DATA_DESCRIBE_SCHEMA' }, 'INVALID_ARGUMENTS'],
    ['a plain-integer call id', { ...base, callId: '123', tool: 'DATA_DESCRIBE_SCHEMA' }, 'INVALID_ARGUMENTS'],
    ['a call id with a colon', { ...base, callId: 'a:b', tool: 'DATA_DESCRIBE_SCHEMA' }, 'INVALID_ARGUMENTS'],
    ['no settings at all', { workspace: 'acme', agent: 'scout', tool: 'DATA_DESCRIBE_SCHEMA' }, 'DATABASE_OFF'],
  ])('%s → %s', (_name, input, expected) => {
    expect(code(input)).toBe(expected);
  });

  it.each<[string, unknown, string]>([
    [
      'an object param',
      { ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: ['a', { a: 1 }] } },
      'params.1: a param must be a string, a finite number, a boolean or null (no objects or arrays)',
    ],
    ['no workspace', { agent: 'scout', tool: 'DATA_DESCRIBE_SCHEMA' }, 'workspace: workspace is required'],
    ['sql over 100 KB', { ...base, tool: 'DATA_WRITE_SQL', arguments: { sql: 'x'.repeat(102_401) } }, 'sql: sql must be at most 102400 bytes'],
    ['no agent', { workspace: 'acme', tool: 'DATA_DESCRIBE_SCHEMA' }, 'agent: agent is required'],
    ['a numeric agent', { workspace: 'acme', agent: 7, tool: 'DATA_DESCRIBE_SCHEMA' }, 'agent: agent must be a string'],
  ])('says what is wrong with %s', (_name, input, detail) => {
    const r = planCall(input, 16);
    // Said once, not once per check that failed.
    expect(r.ok ? 'ok' : r.failure.detail).toBe(detail);
  });

  it('tells an agent without settings once that it has no database, and shows the flag that gives it one', () => {
    const r = planCall({ workspace: 'acme', agent: 'scout', tool: 'DATA_DESCRIBE_SCHEMA' }, 16);
    if (r.ok) throw new Error('planned a call of an agent without a database');
    const body = errorBody(r.failure.code, r.failure.detail);
    expect(body.message.match(/no database/g)).toHaveLength(1);
    expect(body.hint).toContain(`--settings '{"database":"agent"}'`);
  });

  it('routes a database to the same shard every time', () => {
    const a = planCall({ ...base, tool: 'DATA_DESCRIBE_SCHEMA' }, 16);
    const b = planCall({ ...base, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, 16);
    expect(a.ok && b.ok && a.plan.shard === b.plan.shard).toBe(true);
  });
});

describe('parseShardRange', () => {
  it('reads ranges and lists', () => {
    expect(parseShardRange('0-3', 16)).toEqual([0, 1, 2, 3]);
    expect(parseShardRange('5,1,2-3', 16)).toEqual([1, 2, 3, 5]);
  });
  it.each(['8-3', '0-16', 'x', '1,,2'])('refuses %s', (spec) => {
    expect(() => parseShardRange(spec, 16)).toThrow('--shards');
  });
});
