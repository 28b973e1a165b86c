import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeIssues } from '../../src/contracts/describe-issues.ts';
import { schemaErrorFormatter } from '../../src/http/route-validation.ts';
import { AgentDbError } from '../../src/errors.ts';

describe('describeIssues', () => {
  it('words each issue `path: message`, the input itself by its message alone, joined by "; "', () => {
    const r = z.strictObject({ a: z.object({ b: z.number() }) }).safeParse({ a: { b: 'x' }, c: 1 });
    expect(r.success).toBe(false);
    expect(describeIssues(r.error!.issues)).toBe('a.b: Invalid input: expected number, received string; Unrecognized key: "c"');
  });

  it('names at most five issues', () => {
    const issues = Array.from({ length: 7 }, (_, i) => ({ path: [`f${i}`], message: 'bad' }));
    expect(describeIssues(issues).split('; ')).toEqual(['f0: bad', 'f1: bad', 'f2: bad', 'f3: bad', 'f4: bad']);
  });
});

describe('schemaErrorFormatter (Fastify schema errors)', () => {
  it('reads the path from instancePath, so a route words a failure as the tool calls do', () => {
    const err = schemaErrorFormatter(
      [
        { keyword: 'invalid_type', instancePath: '/arguments/sql', schemaPath: '', params: {}, message: 'Invalid input' },
        { keyword: 'unrecognized_keys', instancePath: '/', schemaPath: '', params: {}, message: 'Unrecognized key: "x"' },
      ],
      'body',
    );
    expect(err).toBeInstanceOf(AgentDbError);
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENTS', detail: 'arguments.sql: Invalid input; Unrecognized key: "x"' });
  });
});
