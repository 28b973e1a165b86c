import { describe, expect, it, vi } from 'vitest';
import { callRequest } from '../../src/contracts/call.ts';
import { plainCallRequest, plainQueryArguments, plainWriteArguments } from '../../src/contracts/call-request-fast.ts';
import { toolInputs } from '../../src/contracts/tools.ts';
import { planCall } from '../../src/policy/call-plan.ts';

const base = { workspace: 'acme', agent: 'reader', tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } };
const settingsCases: unknown[] = [
  undefined,
  {},
  { database: 'agent' },
  { database: 'workspace', approval: 'write', sandbox: true, sharedData: true },
  { sandbox: false },
  { database: 'nope' },
  { approval: 'always' },
  { sandbox: 'yes' },
  { sharedData: 1 },
  { database: 'agent', extra: 1 },
  { database: undefined },
  null,
  [],
  'agent',
];
const envelopeCases: Record<string, unknown>[] = [
  base,
  { ...base, callId: 'call-1_A' },
  { ...base, callId: 'a'.repeat(128) },
  { ...base, callId: 'a'.repeat(129) },
  { ...base, callId: '12345' },
  { ...base, callId: 'has space' },
  { ...base, callId: 7 },
  { ...base, callId: undefined },
  { ...base, introspect: true },
  { ...base, introspect: false },
  { ...base, workspace: 'Acme' },
  { ...base, workspace: '' },
  { ...base, workspace: 'a'.repeat(63) },
  { ...base, workspace: 'a'.repeat(64) },
  { ...base, agent: '@alice' },
  { ...base, agent: '-x' },
  { ...base, agent: 3 },
  { ...base, tool: '' },
  { ...base, tool: 'T'.repeat(64) },
  { ...base, tool: 'T'.repeat(65) },
  { ...base, tool: 'NOT_A_TOOL' },
  { ...base, arguments: undefined },
  { workspace: 'acme', agent: 'reader', tool: 'DATA_QUERY_SQL' },
  { ...base, arguments: 'text' },
  { ...base, unknown: 1 },
  { ...base, member: { name: 'alice', role: 'admin' }, agent: '@alice' },
  { ...base, workspace: undefined },
  { agent: 'reader', tool: 'DATA_QUERY_SQL' },
];

/** Every envelope case with every settings case (absent, when undefined). */
const cases = envelopeCases.flatMap((e) => settingsCases.map((s) => (s === undefined ? { ...e } : { ...e, settings: s })));

describe('plainCallRequest', () => {
  it("gives zod's own output, key order and defaults included, or leaves the call to zod", () => {
    let fast = 0;
    for (const input of cases) {
      const mine = plainCallRequest(input);
      const zod = callRequest.safeParse(input);
      if (mine === undefined) continue;
      fast++;
      expect(zod.success, JSON.stringify(input)).toBe(true);
      expect(JSON.stringify(mine)).toBe(JSON.stringify(zod.data));
      expect(Object.keys(mine)).toEqual(Object.keys(zod.data!));
      expect(mine.arguments).toBe((input as { arguments?: unknown }).arguments);
    }
    // The plain shapes above do take the fast path.
    expect(fast).toBeGreaterThan(40);
  });

  it('leaves objects other than plain ones, and members, to zod', () => {
    expect(plainCallRequest(null)).toBeUndefined();
    expect(plainCallRequest([base])).toBeUndefined();
    expect(plainCallRequest(Object.assign(Object.create({ inherited: 1 }), base))).toBeUndefined();
    expect(plainCallRequest({ ...base, member: { name: 'alice', role: 'admin' } })).toBeUndefined();
  });

  it("plans every case as zod's path alone does", () => {
    let ok = 0;
    for (const input of cases) {
      // A null-prototype copy is left to zod, which takes it as it takes the plain object.
      const byZod = planCall(Object.assign(Object.create(null), input), 16);
      const planned = planCall(input, 16);
      expect(JSON.stringify(planned), JSON.stringify(input)).toBe(JSON.stringify(byZod));
      if (planned.ok) ok++;
    }
    expect(ok).toBeGreaterThan(10);
  });

  it('plans a call read from JSON text of known size as it plans the call alone, up to MAX_CALL_BYTES', () => {
    // The worker passes the bytes of the job's data text: arguments within it are not measured
    // again while it is within the limit; past it, or when zod's copy of them is planned, they are.
    for (const input of cases) {
      const text = JSON.stringify(input);
      const parsed = JSON.parse(text) as unknown;
      const bytes = Buffer.byteLength(text);
      for (const max of [bytes, bytes - 1, 64]) {
        expect(JSON.stringify(planCall(parsed, 16, max, bytes)), text).toBe(JSON.stringify(planCall(parsed, 16, max)));
        const byZod = Object.assign(Object.create(null), parsed);
        expect(JSON.stringify(planCall(byZod, 16, max, bytes)), text).toBe(JSON.stringify(planCall(byZod, 16, max)));
      }
    }
  });
});

describe('plainQueryArguments', () => {
  const sqls: unknown[] = ['SELECT 1', '', 7, 'x'.repeat(100 * 1024), 'x'.repeat(100 * 1024 + 1), 'é'.repeat(40 * 1024), 'é'.repeat(60 * 1024)];
  const others: Record<string, unknown>[] = [
    {},
    { params: [] },
    { params: [1, 'a', true, null, 2.5] },
    { params: [Number.NaN] },
    { params: [Number.POSITIVE_INFINITY] },
    { params: [{}] },
    { params: [[1]] },
    { params: [undefined] },
    // biome-ignore lint/suspicious/noSparseArray: a hole is zod's to judge
    { params: [1, , 2] },
    { params: Array.from({ length: 100 }, (_, i) => i) },
    { params: Array.from({ length: 101 }, (_, i) => i) },
    { params: 'a' },
    { max_rows: 1 },
    { max_rows: 1000 },
    { max_rows: 1001 },
    { max_rows: 0 },
    { max_rows: 2.5 },
    { max_rows: '5' },
    { scope: 'workspace' },
    { scope: 'agent', agent: 'other' },
    { scope: 'all' },
    { agent: 'Other' },
    { agent: 5 },
    { as_of: '2026-12-01T02:00:00Z' },
    { extra: 1 },
    { max_rows: undefined },
  ];
  it("plans each query as zod's path alone does", () => {
    let ok = 0;
    for (const sql of sqls) {
      for (const o of others) {
        const input = { ...base, settings: { database: 'agent', sharedData: true }, arguments: { sql, ...o } };
        // A null-prototype copy of the arguments is left to zod, which takes it as a plain object.
        const byZod = planCall({ ...input, arguments: Object.assign(Object.create(null), input.arguments) }, 16);
        const planned = planCall(input, 16);
        expect(JSON.stringify(planned), JSON.stringify(o)).toBe(JSON.stringify(byZod));
        if (planned.ok) {
          ok++;
          expect(Object.keys(planned.plan.args)).toEqual(Object.keys(byZod.ok ? byZod.plan.args : {}));
        }
      }
    }
    expect(ok).toBeGreaterThan(20);
  });
});

describe('plainWriteArguments', () => {
  const write = { ...base, tool: 'DATA_WRITE_SQL', settings: { database: 'agent', sharedData: true } };
  const sqls: unknown[] = ['INSERT INTO t (v) VALUES (?)', '', 7, 'x'.repeat(100 * 1024), 'x'.repeat(100 * 1024 + 1), 'é'.repeat(60 * 1024)];
  const others: Record<string, unknown>[] = [
    {},
    { params: [1, 'a', true, null, 2.5] },
    { params: [Number.NaN] },
    { params: [{}] },
    // biome-ignore lint/suspicious/noSparseArray: a hole is zod's to judge
    { params: [1, , 2] },
    { params: Array.from({ length: 101 }, (_, i) => i) },
    { params: 'a' },
    { rationale: 'why' },
    { rationale: '' },
    { rationale: 'r'.repeat(2000) },
    { rationale: 'r'.repeat(2001) },
    { rationale: 'é'.repeat(2000) },
    { rationale: 5 },
    { rationale: 'why', params: ['x'], scope: 'workspace' },
    { scope: 'agent', agent: 'other' },
    { scope: 'all' },
    { agent: 'Other' },
    { max_rows: 5 },
    { as_of: '2026-12-01T02:00:00Z' },
    { rationale: undefined },
  ];
  it("plans each write as zod's path alone does", () => {
    let ok = 0;
    for (const sql of sqls) {
      for (const o of others) {
        const input = { ...write, arguments: { sql, ...o } };
        const byZod = planCall({ ...input, arguments: Object.assign(Object.create(null), input.arguments) }, 16);
        const planned = planCall(input, 16);
        expect(JSON.stringify(planned), JSON.stringify(o)).toBe(JSON.stringify(byZod));
        if (planned.ok) {
          ok++;
          expect(Object.keys(planned.plan.args)).toEqual(Object.keys(byZod.ok ? byZod.plan.args : {}));
        }
      }
    }
    expect(ok).toBeGreaterThan(10);
  });

  it('plans a small insert without parsing its arguments with zod', () => {
    // A write is planned twice, by its client and by the worker, on a small insert's path.
    const parse = vi.spyOn(toolInputs.DATA_WRITE_SQL, 'safeParse');
    try {
      const planned = planCall({ ...write, arguments: { sql: 'INSERT INTO log (v) VALUES (?)', params: ['row 1'], rationale: 'log it' } }, 16);
      expect(planned.ok && planned.plan.args).toEqual({ sql: 'INSERT INTO log (v) VALUES (?)', params: ['row 1'], rationale: 'log it' });
      expect(parse).not.toHaveBeenCalled();
      expect(plainWriteArguments({ sql: 'DELETE FROM log', extra: 1 })).toBeUndefined();
    } finally {
      parse.mockRestore();
    }
  });
});

// Review R1: a library caller's object is not JSON. zod reads each key it knows whatever its
// enumerability, and each value once; the fast path read keys by Object.keys (a hidden member
// or as_of went unseen) and a param twice (checked, then copied: a getter's second value kept).
describe('objects that are not plain JSON', () => {
  it('leaves a hidden (non-enumerable) member or as_of to zod', () => {
    const call = { ...base };
    Object.defineProperty(call, 'member', { value: { name: 'boss', role: 'admin' }, enumerable: false });
    expect(plainCallRequest(call)).toBeUndefined();
    expect(callRequest.safeParse(call).success).toBe(false);
    const args = { sql: 'SELECT 1' };
    Object.defineProperty(args, 'as_of', { value: '2026-12-01T02:00:00Z', enumerable: false });
    expect(plainQueryArguments(args)).toBeUndefined();
    expect(toolInputs.DATA_QUERY_SQL.parse(args)).toHaveProperty('as_of');
  });

  it('keeps the param it checked, read once', () => {
    let reads = 0;
    const params: unknown[] = [];
    Object.defineProperty(params, 0, { get: () => (reads++ === 0 ? 'ok' : { not: 'a param' }), enumerable: true });
    const args = { sql: 'SELECT ?', params };
    expect(plainQueryArguments(args)).toEqual({ sql: 'SELECT ?', params: ['ok'], max_rows: 100 });
    expect(reads).toBe(1);
  });
});
