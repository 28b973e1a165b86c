import type { JsonSchemaType } from '@modelcontextprotocol/sdk/validation/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { describe, expect, it } from 'vitest';
import { awaiting } from '../../src/calls/call-answers.ts';
import { unavailable } from '../../src/calls/outage-answers.ts';
import { errorEnvelope, okEnvelope } from '../../src/contracts/envelope.ts';
import { toolOutputSchema } from '../../src/contracts/tool-output.ts';
import { TOOL_NAMES } from '../../src/contracts/tools.ts';
import { toolResult } from '../../src/mcp/tool-result.ts';

// The outcomes a live server rarely shows (queued, running, Redis gone with the call maybe
// still to run, a rate limit with retryAfter) validate against every tool's outputSchema too.

const ajv = new AjvJsonSchemaValidator();

describe('toolResult against toolOutputSchema', () => {
  it.each(TOOL_NAMES)('%s: every kind of answer validates; a malformed one does not', (tool) => {
    const validate = ajv.getValidator(toolOutputSchema(tool) as JsonSchemaType);
    const limited = errorEnvelope('c1', tool, 'RATE_LIMITED');
    limited.error.retryAfter = 3;
    const answers = [
      { ok: false as const, callId: 'c1', tool, status: 'queued' as const },
      { ok: false as const, callId: 'c1', tool, status: 'running' as const },
      awaiting('c1', tool, { id: 'ap_1', tier: 'write', expiresAt: '2026-12-04T17:00:00Z', sql: 'DELETE FROM t' }),
      unavailable('c1', tool, 'Redis is down', true),
      limited,
      errorEnvelope('c1', tool, 'SQL_ERROR', 'no such table: x'),
      okEnvelope('c1', tool, 1, {}),
    ];
    for (const answer of answers) {
      const content = toolResult(answer).structuredContent;
      expect(validate(content), JSON.stringify(content)).toMatchObject({ valid: true });
    }
    expect(validate({ callId: 'c1', credits: 1 }).valid).toBe(false);
    expect(validate({ callId: 'c1', error: { code: 'X' } }).valid).toBe(false);
    expect(validate({ ok: false, callId: 'c1', tool, status: 'sleeping' }).valid).toBe(false);
  });

  it('types the fields of each tool where present', () => {
    const query = ajv.getValidator(toolOutputSchema('DATA_QUERY_SQL') as JsonSchemaType);
    const ok = (result: Record<string, unknown>) => toolResult(okEnvelope('c1', 'DATA_QUERY_SQL', 1, result)).structuredContent;
    expect(query(ok({ columns: ['a'], rows: [[1]], truncated: false })).valid).toBe(true);
    expect(query(ok({ columns: 'a', rows: [[1]], truncated: false })).valid).toBe(false);
    const drop = ajv.getValidator(toolOutputSchema('DATA_DROP_TABLE') as JsonSchemaType);
    expect(drop(toolResult(okEnvelope('c1', 'DATA_DROP_TABLE', 2, { dropped: 't', type: 'index' })).structuredContent).valid).toBe(false);
  });
});
